"""Graph nodes: an agent's step (leader or member) and the human gate."""
