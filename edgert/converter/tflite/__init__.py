"""TFLite export of edgert IR graphs (edgert/converter/tflite/writer.py): the payload of LiteRT
partitions and a way to run the same graph under LiteRT for comparison."""
from .writer import unsupported, write_tflite

__all__ = ["unsupported", "write_tflite"]
