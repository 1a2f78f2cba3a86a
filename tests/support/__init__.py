"""Helpers shared by the test tiers: processes, waiting, playbooks (proc) and the local Kubernetes (kube)."""
