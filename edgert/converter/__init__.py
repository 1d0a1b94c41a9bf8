"""The workstation side: a model in, one .edgert file out.

    frontend/     model formats in: ONNX (onnx_import.py, onnx_ops/); TFLite comes here
    ir.py         the in-memory graph;  ops/  the op registry (shapes, packing, numpy meaning)
    passes/       graph rewrites;  quant/  int8, fp16, dynamic;  prune/  pruning
    partitioner.py  nodes handed to a fallback runtime;  bounds.py  bounded dimensions
    planner.py    the static arena plan;  writer.py  the file writer;  emit.py  graph -> bytes
    tflite/       the TFLite writer (LiteRT partitions)
    options.py    ConvertOptions: every setting, checked in one place
    pipeline.py   convert(): the stages in order, over one graph per sample size

May import edgert.runtime (calibration and checks run the converted graph) and the base
modules; never edgert.cli (docs/design.md, "Layout")."""
