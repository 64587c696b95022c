"""The JSON-RPC layer: the stdio wire, the peer, dispatch and error codes; knows nothing of ACP."""
