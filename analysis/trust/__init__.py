"""Whether the numbers can be believed: the trust checks (lossless output, requests served, server
counters, drift, stationarity, a quiet host) and the cross-check against another run."""
