"""Support checks by op family: ``compute`` (conv, pooling, matmul, softmax, elementwise and the
shared dtype / shape / size checks), ``glue`` (data movement, reductions, normalisation) and
``quantized`` (QDQ chains and islands)."""
