"""oomlab_recorder: record what one PyTorch training step (or inference batch) of your own nn.Module
allocates, on the meta device (no GPU, no weights), as an oomlab text trace for `oomlab replay`."""
from .cuda_choices import choose_sdpa_backend
from .record import (Recording, answer_padded, answer_unpadded, default_optimizer, record,
                     record_inference)
from .trace import CATEGORIES, TraceError, parse_trace, read_trace, summarize, write_trace
from .version import __version__

__all__ = ["CATEGORIES", "Recording", "TraceError", "__version__", "answer_padded", "answer_unpadded",
           "choose_sdpa_backend", "default_optimizer", "parse_trace", "read_trace", "record",
           "record_inference", "summarize", "write_trace"]
