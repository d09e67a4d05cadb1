"""A plan that deletes or replaces stored data (a file system, a bucket fmcluster made) is refused, even with
``--yes``, unless ``--allow-data-loss`` is given: Terraform's ``prevent_destroy`` carried over to a flag. The
refusal comes after the plan is read and before any AWS write, and says what would be lost.

With the flag, each such resource that AWS can back up (FSx: CreateBackup) is backed up first, and the walk waits
for every backup to be AVAILABLE before anything is deleted; ``--no-backup`` skips that. A backup that cannot be
made stops the command before any deletion.

``destroy`` is not held to this: deleting everything is what it is asked for, its confirmation names the
cluster, and ``--keep-storage`` keeps the file systems."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from fmcluster.engine import Observed, Resource, ResourceChange
from fmcluster.engine.waiting import growing, wait_until
from fmcluster.errors import FmclusterError
from fmcluster.output import ui
from fmcluster.plan.changes import Plan
from fmcluster.verbs.session import Session

ALLOW_FLAG = "--allow-data-loss"
NO_BACKUP_FLAG = "--no-backup"
# The longest fmcluster waits for one backup (FSx backs up incrementally; a first backup of a large file system
# can take hours, and the command's own --timeout still applies).
BACKUP_WAIT_S = 6 * 3600


class DataLossRefused(FmclusterError):
    """The plan would delete stored data and the command did not allow it: nothing was changed."""

    exit_code = 2


@dataclass
class Loss:
    change: ResourceChange
    resource: Resource
    observed: Observed | None

    def line(self) -> str:
        where = f" ({self.observed.id})" if self.observed else ""
        why = f": {self.change.reason}" if self.change.reason else ""
        return f"{self.change.action} {self.resource.name}{where} loses {self.resource.stored_data}{why}"


def losses(session: Session, plan: Plan) -> list[Loss]:
    """The plan's deletions and replacements of resources that hold users' data, each read from AWS."""
    by_name = {r.name: r for r in [*plan.resources, *plan.orphans]}
    found = []
    for change in plan.changes:
        resource = by_name.get(change.resource)
        if change.action in ("replace", "delete") and resource is not None and resource.stored_data:
            found.append(Loss(change, resource, _observe(session, resource)))
    return found


def guard(session: Session, plan: Plan, allow: bool, backup: bool) -> list[Loss]:
    """Say what the plan would lose; refuse it unless ``allow``. The losses that go ahead."""
    found = losses(session, plan)
    if not found:
        return []
    ui.warning("this plan deletes stored data:\n" + "\n".join(f"  {loss.line()}" for loss in found))
    if not allow:
        raise DataLossRefused(f"nothing was changed: the plan deletes or replaces stored data (above), which "
                              f"{ALLOW_FLAG} allows (--yes alone does not); with it, each FSx file system is "
                              f"backed up first unless {NO_BACKUP_FLAG}")
    for loss in found:
        why = loss.resource.why_no_backup(session.ctx, loss.observed) if loss.observed else "it is not in AWS"
        if not backup:
            ui.warning(f"{loss.resource.name}: no backup ({NO_BACKUP_FLAG}); its data is lost")
        elif why:
            ui.warning(f"{loss.resource.name}: no backup is possible, so its data is lost: {why}")
        else:
            ui.note(f"{loss.resource.name} ({loss.observed.id}) is backed up before it goes ({NO_BACKUP_FLAG} "
                    "skips this)")
    return found


def back_up(session: Session, found: list[Loss], backup: bool) -> list[str]:
    """Back up each loss that can be, and wait until every backup is usable; the backups' ids. Any failure stops
    the command here, before the walk deletes anything."""
    if not backup:
        return []
    ctx = session.ctx
    started: list[tuple[Loss, str]] = []
    for loss in found:
        if loss.observed is None or loss.resource.why_no_backup(ctx, loss.observed):
            continue
        try:
            backup_id = loss.resource.back_up(ctx, loss.observed, f"fmcluster-{uuid.uuid4().hex}")
        except Exception as exc:
            raise _stopped(loss, f"AWS refused its backup: {exc}") from None
        ui.note(f"backing up {loss.resource.name} ({loss.observed.id}) as {backup_id}")
        started.append((loss, backup_id))
    for loss, backup_id in started:
        def ready(loss: Loss = loss, backup_id: str = backup_id) -> bool:
            phase, detail = loss.resource.backup_phase(ctx, backup_id)
            if phase == "failed":
                raise _stopped(loss, f"its backup {backup_id} failed: {detail}")
            return phase == "ready"

        wait_until(ready, what=f"backup {backup_id} of {loss.observed.id}", timeout=BACKUP_WAIT_S,
                   interval=growing(), stop=ctx.stop)
        ui.note(f"backup {backup_id} of {loss.observed.id} is AVAILABLE; it outlives the cluster and is billed "
                f"until deleted (aws fsx delete-backup --backup-id {backup_id})")
    return [backup_id for _, backup_id in started]


def _stopped(loss: Loss, why: str) -> FmclusterError:
    return FmclusterError(f"{loss.resource.name} ({loss.observed.id if loss.observed else '?'}): {why}; nothing "
                          f"was deleted. Re-run to try again, or with {NO_BACKUP_FLAG} to go ahead without a backup")


def _observe(session: Session, resource: Resource) -> Observed | None:
    ctx = session.ctx
    record = session.store.resource(ctx.cluster, ctx.region, resource.kind, resource.key)
    return resource.read(ctx, record.id if record else None)
