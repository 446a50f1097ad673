"""Why an arm is as fast as it is: the AR step against the GPU's memory bandwidth, GPU time per token
against wall time, and where a DDTree step's time goes."""
