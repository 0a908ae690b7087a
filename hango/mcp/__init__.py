"""Tools from MCP servers: the servers hango knows (the operator's and the tenants'), and the sessions a process
keeps to them."""
