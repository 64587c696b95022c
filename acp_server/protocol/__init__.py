"""The ACP vocabulary: method names, wire models for params and results; data, no behaviour."""
