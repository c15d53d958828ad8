"""The team graph: the router (post office and scheduler) and the graph builder."""
