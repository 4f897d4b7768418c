"""The MCP tool sets, one module each: moss (capsules), loop (search, insights, sessions),
cstack (memory files), needlecast (messages) and moe (the board).
"""
