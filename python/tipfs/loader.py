"""A sampler that discloses each epoch's order to tipfs ahead of the loader that reads it.

    sampler = tipfs.DisclosingSampler(RandomSampler(dataset), dataset.path_of)
    loader = DataLoader(dataset, sampler=sampler, batch_size=32, num_workers=4)

Each epoch draws the wrapped sampler's order once, then, as the loader takes indices, keeps the
files of the next samples disclosed up to a byte budget (the mount's cache size) ahead of it, on a stream of its own that
the loader's worker processes may consume (they read the samples; this process hints them). At
the end of the epoch, or when the iterator is dropped, whatever is still disclosed is cancelled.
Nothing here imports torch: any iterable of indices works, and so does a plain Python loop
(`for i in DisclosingSampler(order, path_of): ...`). Off tipfs it warns once and only passes the
indices through.
"""

import errno
import itertools
import os
import threading
import warnings
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from ._hints import (HintStream, NotOnTipfsError, PathHint, TipfsError, TipfsWarning, _text,
                     make_error)

# One sample's files: a path, (path, offset, length), or a list of them.
SampleFiles = Union[PathHint, List[PathHint], Tuple[PathHint, ...]]

# The default budget: the mount's cache capacity, within these bounds. The manager prefetches no
# further ahead than the cache holds, and more disclosed made epochs slower (bench/loader/README).
MIN_DEFAULT_BUDGET_BYTES = 8 << 20
MAX_DEFAULT_BUDGET_BYTES = 256 << 20
# Samples disclosed per index taken while topping up: a call's worth of path records.
CHUNK_POSITIONS = 256
# Named streams from here up belong to the loader helpers (one per sampler and mount).
_STREAM_NAMES = itertools.count(0x8000_0001)
_STREAM_NAMES_LOCK = threading.Lock()


def _next_stream_name() -> int:
    with _STREAM_NAMES_LOCK:
        return next(_STREAM_NAMES)


def _items(files: SampleFiles) -> List[PathHint]:
    if isinstance(files, list) or (isinstance(files, tuple) and not _is_range(files)):
        return list(files)
    return [files]


def _is_range(item) -> bool:
    return (len(item) == 3 and isinstance(item[1], int) and isinstance(item[2], int)
            and not isinstance(item[0], int))


class DisclosingSampler:
    """Wraps `sampler` (any iterable of sample indices with a fresh order per iteration: a
    PyTorch Sampler, a list) and discloses each epoch's samples to tipfs as the loader takes them.

    path_of(index) gives the sample's file(s): a path, (path, offset, length), or a list of them.
    budget_bytes bounds what is disclosed beyond the samples the loader has taken (default: the
    mount's cache capacity, 8 MiB to 256 MiB; samples taken but not read yet, in worker
    processes, come on top). share=True (the default) lets the loader's worker
    processes consume the hints. strict=False (the default) warns once (TipfsWarning) and goes on
    without hints when the data is not on tipfs or a hint is refused; strict=True raises.

    `stats` counts, over the sampler's life: epochs, samples, disclosed (items), disclosed_bytes,
    calls (ioctls), cancelled_bytes (disclosed but never read when an epoch ended).
    """

    def __init__(self, sampler: Iterable[int], path_of: Callable[[int], SampleFiles], *,
                 budget_bytes: Optional[int] = None, share: bool = True, strict: bool = False):
        if budget_bytes is not None and budget_bytes <= 0:
            raise ValueError(f"budget_bytes must be positive, not {budget_bytes}")
        self.sampler = sampler
        self.path_of = path_of
        self.budget_bytes = budget_bytes
        self.share = share
        self.strict = strict
        self.stats: Dict[str, int] = dict(epochs=0, samples=0, disclosed=0, disclosed_bytes=0,
                                          calls=0, cancelled_bytes=0)
        self._streams: Dict[int, HintStream] = {}  # by st_dev of the mount
        self._files: Dict[str, Tuple[int, int]] = {}  # path -> (st_dev, st_size)
        self._cache_bytes: Dict[int, int] = {}  # st_dev of a mount -> its cache capacity
        self._epoch = 0  # the epoch whose iterator may disclose and cancel
        self._lock = threading.Lock()
        self._warned: set = set()
        self._pid = os.getpid()

    def __len__(self) -> int:
        return len(self.sampler)  # type: ignore[arg-type]

    def set_epoch(self, epoch: int) -> None:
        """Passed on to the wrapped sampler (DistributedSampler's seed per epoch)."""
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        return self._run_epoch(list(self.sampler))

    # ---- one epoch ---------------------------------------------------------------------------

    def _run_epoch(self, order: List[int]) -> Iterator[int]:
        with self._lock:
            self._epoch += 1
            epoch = self._epoch
            self.stats["epochs"] += 1
        # The last epoch's leftovers (samples it disclosed that were never read).
        self._cancel_leftovers()
        budget = self._budget()
        counted: Dict[int, int] = {}  # position -> its bytes counted in `ahead`
        disclosed_to = 0  # positions [0, disclosed_to) of `order` are disclosed
        ahead = 0  # bytes disclosed for positions after the one being taken
        filling = True  # topping up towards the whole budget, a chunk per index taken
        try:
            for position, index in enumerate(order):
                ahead -= counted.pop(position, 0)
                current = self._epoch == epoch and os.getpid() == self._pid
                filling = filling or ahead < budget // 2
                if current and filling and disclosed_to < len(order):
                    # Up to CHUNK_POSITIONS samples now (one call), the rest at the next
                    # indices: the loader never waits for a whole budget of stat(2) calls.
                    disclosed_to = max(disclosed_to, position)
                    disclosed_to, ahead = self._disclose(order, disclosed_to, position, ahead,
                                                         budget, counted)
                    budget = self._budget()  # the first call found the mount and its cache
                    filling = ahead < budget and disclosed_to < len(order)
                with self._lock:
                    self.stats["samples"] += 1
                yield index
        except GeneratorExit:
            # The loader dropped the epoch: nobody will read the rest. (An epoch whose order was
            # taken to the end keeps its hints: worker processes are still reading the last
            # batches; the next epoch or close() cancels what they leave.)
            if self._epoch == epoch and os.getpid() == self._pid:
                self._cancel_leftovers()
            raise

    def _disclose(self, order: List[int], start: int, position: int, ahead: int, budget: int,
                  counted: Dict[int, int]) -> Tuple[int, int]:
        """Discloses positions from `start` on until `budget` bytes lie beyond `position`, at
        most CHUNK_POSITIONS of them."""
        batches: Dict[int, Tuple[HintStream, List[PathHint], List[int]]] = {}
        stop = start
        while stop < len(order) and stop - start < CHUNK_POSITIONS and (
                ahead < budget or stop <= position):
            size_of_position = 0
            for item in self._files_of(order[stop]):
                located = self._locate(item)
                if located is None:
                    continue
                stream, size = located
                size_of_position += size
                _, items, sizes = batches.get(id(stream), (stream, [], []))
                items.append(item)
                sizes.append(size)
                batches[id(stream)] = (stream, items, sizes)
            if stop > position:
                counted[stop] = size_of_position
                ahead += size_of_position
            stop += 1
        for stream, items, sizes in batches.values():
            sent = stream.disclose(items)
            with self._lock:
                self.stats["calls"] += 1
                self.stats["disclosed"] += sent
                self.stats["disclosed_bytes"] += sum(sizes[:sent])
        return stop, ahead

    def _files_of(self, index: int) -> List[PathHint]:
        try:
            return _items(self.path_of(index))
        except Exception as e:  # the user's function: its error is the loader's to report
            self._warn_once("path_of", f"path_of({index}) failed: {e!r}")
            if self.strict:
                raise
            return []

    def _locate(self, item: PathHint) -> Optional[Tuple[HintStream, int]]:
        """The stream of the item's mount and the bytes it will read (one stat(2) per file,
        remembered: sizes only weigh the budget, the daemon clips every range to the file)."""
        path = _text(item[0] if isinstance(item, tuple) else item)
        known = self._files.get(path)
        if known is None:
            try:
                st = os.stat(path)
            except OSError as e:
                self._report(make_error(e.errno or errno.ENOENT, "cannot disclose", path))
                return None
            if len(self._files) > 1 << 20:
                self._files.clear()
            known = self._files[path] = (st.st_dev, st.st_size)
        device, size = known
        stream = self._streams.get(device)
        if stream is None:
            stream = self._streams[device] = self._open_stream(path)
        if not stream.active:
            return None
        if isinstance(item, tuple) and _is_range(item):
            size = item[2] if item[2] > 0 else max(0, size - item[1])
        return stream, size

    def _budget(self) -> int:
        if self.budget_bytes is not None:
            return self.budget_bytes
        capacity = max(self._cache_bytes.values(), default=0)
        return min(MAX_DEFAULT_BUDGET_BYTES, max(MIN_DEFAULT_BUDGET_BYTES, capacity))

    def _open_stream(self, path: str) -> HintStream:
        try:
            stream = HintStream(path, name=_next_stream_name(), strict=True)
        except TipfsError as e:
            self._report(e)
            return _Inactive()  # type: ignore[return-value]
        if self.share:
            try:
                stream.share()
            except NotOnTipfsError as e:
                # An older mount: hints still prefetch, workers' reads hit the cache but do not
                # consume them, so the main process's budget is what bounds them.
                self._warn_once("share", f"the mount cannot share hints with worker processes "
                                         f"({e}); hinting without sharing")
            except TipfsError as e:
                self._report(e)
        stream.strict = self.strict
        self._cache_bytes[stream.mount.device] = stream.query().get("cache_capacity_bytes", 0)
        return stream

    def _cancel_leftovers(self) -> None:
        for stream in list(self._streams.values()):
            if not stream.active:
                continue
            left = stream.query().get("stream_hinted_bytes", 0)
            with self._lock:
                self.stats["cancelled_bytes"] += left
            if left:
                stream.cancel()

    def _report(self, error: TipfsError) -> None:
        if self.strict:
            raise error
        key = type(error).__name__ + str(error.errno)
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(f"{error} (going on without hints)", TipfsWarning, stacklevel=4)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(f"tipfs: {message}", TipfsWarning, stacklevel=4)

    def close(self) -> None:
        """Cancels what is disclosed and closes the streams (also done when garbage collected)."""
        with self._lock:
            self._epoch += 1
        if os.getpid() == self._pid:
            self._cancel_leftovers()
        for stream in self._streams.values():
            stream.close()
        self._streams.clear()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter exit the mount may be gone: nothing left to free
            pass

    def __getstate__(self):
        # Pickled into worker processes (spawn): they need none of the hinting state.
        state = self.__dict__.copy()
        state["_streams"] = {}
        state["_lock"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()


class _Inactive:
    """Stands for a mount that takes no hints."""
    active = False

    def close(self) -> None:
        pass


def disclosing(indices: Iterable[int], path_of: Callable[[int], SampleFiles],
               **options) -> Iterator[int]:
    """The same for one pass over `indices`, in a plain loop:

        for i in tipfs.disclosing(order, lambda i: files[i]):
            data = open(files[i], "rb").read()
    """
    sampler = DisclosingSampler(indices, path_of, **options)
    try:
        yield from sampler
    finally:
        sampler.close()
