"""Eval: hindsight facts, replay at cuts, rival strategies, synthetic corpora and the gate."""
