"""What the plan assumes: the byte accounting of mixed-precision training with Adam, and the planning
rules. Every constant is repeated in the report, so a reader can redo the sums."""

from __future__ import annotations

# --- accounting (mixed-precision training with Adam, the common FM recipe) ------------------------
#: bf16 weights 2 B + fp32 master weights 4 B + Adam first and second moments (fp32) 8 B + bf16 gradients 2 B.
STATE_BYTES_PER_PARAM = 16
STATE_ACCOUNTING = (
    "16 B/param: bf16 weights 2 + fp32 master weights 4 + Adam moments (fp32 m, v) 8 + bf16 gradients 2; "
    "fully sharded (FSDP / ZeRO-3) across every accelerator of the training queue"
)
#: A checkpoint holds what a restart needs: the fp32 master weights, the Adam moments and bf16 weights.
#: Gradients are recomputed, so they are not saved.
CHECKPOINT_BYTES_PER_PARAM = 14
CHECKPOINT_ACCOUNTING = "14 B/param: bf16 weights 2 + fp32 master weights 4 + Adam moments 8 (no gradients)"
#: Gradients are reduced in bf16.
GRADIENT_BYTES_PER_PARAM = 2
#: Activations, NCCL buffers and the framework need the rest of HBM; 70% for state is a common planning rule.
HBM_STATE_FRACTION = 0.70
#: Checkpoints that block training for more than this share of the interval are worth fixing.
CHECKPOINT_FRACTION_LIMIT = 0.05
#: FLOPs per token for a dense transformer's forward + backward pass: 6 x parameters.
FLOPS_PER_PARAM_PER_TOKEN = 6
#: AWS counts FSx capacity in decimal steps: 1,200 GiB is sold as "1.2 TiB", and the throughput of a
#: PERSISTENT_2 file system is that figure x MB/s/TiB (4,800 GiB at 250 MB/s/TiB = 1,200 MB/s).
GIB_PER_FSX_TIB = 1000
#: DescribeInstanceTypes gives accelerator memory in MiB; the report counts HBM in decimal GB.
GB_PER_GIB = 1.073741824
LUSTRE_TIERS = (125, 250, 500, 1000)
NETWORK_ASSUMPTION = (
    "the nodes reach storage at most at their EFA bandwidth (Gbps x nodes); Lustre over TCP uses ENA, "
    "which can be lower, so this is an upper bound and Lustre is normally the limit"
)
