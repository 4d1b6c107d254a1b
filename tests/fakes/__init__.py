"""Shared test fakes: a throwaway PKI and fake spoke kube-apiservers."""
