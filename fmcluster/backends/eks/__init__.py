"""The eks backend: Amazon EKS with one batch scheduler (Kueue, Volcano or the NVIDIA KAI Scheduler)."""
