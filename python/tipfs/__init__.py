"""tipfs: disclose future reads to a tipfs mount (informed prefetching), from Python.

    import tipfs
    tipfs.disclose(["/mnt/data/a.bin", ("/mnt/data/b.bin", 0, 1 << 20)])  # then read them

    sampler = tipfs.DisclosingSampler(RandomSampler(dataset), dataset.path_of)
    loader = torch.utils.data.DataLoader(dataset, sampler=sampler, num_workers=4)

Pure Python over the ioctl ABI of include/tipfs/hint.h; standard library only (torch is never
imported here). See docs/python.md and tipfs_hint(3).
"""

from ._hints import (HintLimitError, HintStream, NotOnTipfsError, PathHint, Source, TipfsError,
                     TipfsWarning, cancel_all, disclose, is_tipfs, query, stats)
from .loader import DisclosingSampler, disclosing

__version__ = "0.1.0"

__all__ = [
    "DisclosingSampler", "HintLimitError", "HintStream", "NotOnTipfsError", "PathHint", "Source",
    "TipfsError", "TipfsWarning", "cancel_all", "disclose", "disclosing", "is_tipfs", "query",
    "stats",
]
