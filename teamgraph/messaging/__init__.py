"""How agents talk: effects that tools ask for, and the envelopes messages travel in."""
