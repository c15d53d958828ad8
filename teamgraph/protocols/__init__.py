"""Team protocols: the request tracker shared by questions, approvals and shutdowns."""
