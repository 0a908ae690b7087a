"""Data access, one module per aggregate. Every function takes the session and the tenant (or a principal)."""
