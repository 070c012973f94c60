"""Catalogs of real models and GPUs: the figures KV memory and step time are derived from."""

from reference_engine.catalog.gpus import GPUS, GpuSpec, get_gpu
from reference_engine.catalog.models import MODELS, DType, ModelSpec, get_model

__all__ = ["GPUS", "MODELS", "DType", "GpuSpec", "ModelSpec", "get_gpu", "get_model"]
