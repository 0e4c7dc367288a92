"""Reading what an NCCL all-reduce printed: nccl-tests' ``all_reduce_perf`` table and NCCL's own
``NCCL INFO`` lines (which network it used, which libfabric provider aws-ofi-nccl selected, whether
it fell back to TCP sockets). Pure text in, :class:`NcclResult` out; the verdicts are
:mod:`.fabric`'s.

The formats, as the tools print them (read in their sources and in real logs; nothing copied):

- **The table** (NVIDIA/nccl-tests, ``src/util.cu`` ``writeBenchmarkLinePreamble`` /
  ``writeBenchmarkLineBody``): one row per message size, ``size count type redop root`` then, for
  the out-of-place and then the in-place run, ``time algbw busbw #wrong``; times in us, bandwidths
  in GB/s, ``#wrong`` is ``N/A`` when the test runs without data checks (``-c 0``, as preflight.sh
  does). Numbers too wide for their column switch to ``%.0f`` or exponent form (``getFloatStr``).
  A real two-node run (16 x H100) in that format: lessizzmore/create-a3mega-ztan-fork,
  ``ztan-NCCL-test-result``, ending ``8589934592 2147483648 float sum -1 47535 180.71 338.82 0 ...``.
  nccl-tests before the ``root`` column printed ``size count type redop time algbw busbw error``
  (twice), with a float ``error``: aws/aws-ofi-nccl#64 and aws/aws-ofi-nccl#33 (p3dn / p4d over
  EFA). Both are read; #64 also shows an ``NCCL INFO`` line printed in the middle of the table,
  which is skipped.
- **The summary** (``src/common.cu``): ``# Out of bounds values : 0 OK`` and
  ``# Avg bus bandwidth    : 70.742`` (the mean busbw over every row, both columns). Their absence
  means the test did not finish: crashed, killed by the deadline, or the log was cut.
- **The header** ``# nThread 1 nGpus 1 minBytes 8388608 maxBytes 8589934592 step: 2(factor) ...``:
  the largest size asked for; a table that stops below it was cut short.
- **The network** (NVIDIA/nccl ``src/init.cc`` ``commAlloc``: ``INFO(NCCL_INIT, "Using network %s")``
  for every communicator, one node or many): ``NCCL INFO Using network AWS Libfabric``
  (aws-ofi-nccl <= 1.11, aws/aws-ofi-nccl#715), ``NCCL INFO Using network Libfabric`` (later
  releases, NVIDIA/nccl#1597), ``NCCL INFO Using network Socket`` (TCP: the plugin is missing or its
  init failed and NCCL fell back, NVIDIA/nccl#229 and #398), ``IB``.
- **The provider** (aws-ofi-nccl ``Selected Provider is %s`` / ``... (found %d nics)``):
  ``NCCL INFO NET/OFI Selected Provider is efa (found 16 nics)`` (NVIDIA/nccl#1597); ``tcp;ofi_rxm``
  when libfabric had no EFA (NVIDIA/nccl#229).
- **The channels**: ``NCCL INFO Channel 07/0 : 1[1] -> 0[0] [send] via NET/AWS Libfabric/1/GDRDMA``
  (NVIDIA/nccl#1597; ``/GDRDMA``: GPUDirect RDMA), older ``Ring 00 : 7 -> 8 [send] via NET/AWS
  Libfabric/0`` (aws/aws-ofi-nccl#24); ``via NET/Socket/0`` on a TCP fallback.

components/workload/sh/preflight.sh reads the same log with awk: the largest size's busbw is the
out-of-place column (``$8`` of a row with ``root``) and ``Using network Socket`` is a fallback.
This parser agrees with it on those and reads more (the older format, the summary, the provider).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

# mpirun --tag-output prefixes every line with [jobid,rank]<stdout>: (not used by preflight.sh,
# but a log read through another launcher may have it)
_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?")
_USING_NETWORK = re.compile(r"NCCL INFO Using network (.+?)\s*$")
_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is ([^\s,(]+)")
_VIA_NET = re.compile(r"via NET/([^/\n]+?)/\d+(/GDRDMA)?\b")
_SOCKET_INIT = re.compile(r"NCCL INFO NET/Socket\s*:\s*Using")
_WARN = re.compile(r"NCCL WARN\s+(.*\S)")
# matched on the line without its leading '#' (older nccl-tests printed the summary and header without one)
_AVG = re.compile(r"^Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_OUT_OF_BOUNDS = re.compile(r"^Out of bounds values\s*:\s*(\d+)")
_MAX_BYTES = re.compile(r"^nThread\b.*\bmaxBytes\s+(\d+)")
_COLUMNS = re.compile(r"^size\s+count\s+type\s+redop\s+(root\s+)?time", re.I)
# nccl-tests' type names (test_typenames in src/common.cu), fp8 ones included
_TYPES = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
    "f8e4m3", "f8e5m2", "char", "int",
}  # fmt: skip


@dataclass(frozen=True)
class NcclRow:
    """One size of the table: the out-of-place (``oop_``) and in-place (``ip_``) measurements.
    ``*_wrong``: mismatched elements, None when not checked (``N/A``)."""

    size: int
    count: int
    type: str
    redop: str
    root: Optional[int]
    oop_time_us: float
    oop_algbw: float
    oop_busbw: float
    oop_wrong: Optional[float]
    ip_time_us: float
    ip_algbw: float
    ip_busbw: float
    ip_wrong: Optional[float]


@dataclass(frozen=True)
class NcclResult:
    """What one all_reduce_perf log says."""

    rows: tuple[NcclRow, ...]
    max_size_busbw: Optional[float]
    """Out-of-place bus bandwidth (GB/s) of the largest size measured (preflight.sh's figure)."""
    avg_busbw: Optional[float]
    """``# Avg bus bandwidth``; None: the test never printed its summary (did not finish)."""
    network: Optional[str]
    """The network NCCL chose (``Using network X``): ``AWS Libfabric``, ``Libfabric``, ``Socket``, ``IB``."""
    provider: Optional[str]
    """The libfabric provider aws-ofi-nccl selected (``efa``, ``tcp;ofi_rxm``), None: no such line."""
    socket_fallback: bool
    """NCCL used TCP sockets between nodes: ``Using network Socket``, a channel ``via NET/Socket``, or
    (NCCL before the ``Using network`` line) ``NET/Socket : Using`` with no other network named."""
    networks: tuple[str, ...] = ()
    """Every distinct network named (ranks may disagree: one rank on Socket is a fallback)."""
    gdrdma: bool = False
    """A channel over the network used GPUDirect RDMA (``/GDRDMA``)."""
    max_bytes: Optional[int] = None
    """The largest size the run asked for (the header's ``maxBytes``)."""
    out_of_bounds: Optional[int] = None
    """``# Out of bounds values``: wrong elements over all sizes (always 0 with ``-c 0``)."""
    warnings: tuple[str, ...] = ()
    """``NCCL WARN`` messages, in order, each once."""
    verdict: Optional[str] = None
    """The last ``rlinf-eks ...: PASS/FAIL/FAILED ...`` line of the project's own scripts, if any."""

    @property
    def complete(self) -> bool:
        """The test printed its summary: every size ran."""
        return self.avg_busbw is not None

    @property
    def largest_size(self) -> Optional[int]:
        return self.rows[-1].size if self.rows else None

    @property
    def truncated(self) -> bool:
        """The table stops before the largest size asked for, or there is no summary."""
        if not self.rows or not self.complete:
            return True
        return self.max_bytes is not None and self.rows[-1].size < self.max_bytes


def _number(text: str) -> float:
    return float(text)


def _wrong(text: str) -> Optional[float]:
    return None if text.upper() == "N/A" else float(text)


def _row(tokens: list[str], with_root: Optional[bool]) -> Optional[NcclRow]:
    """A table row, or None. ``with_root``: the header said whether there is a ``root`` column
    (None: no header seen, infer it from the fifth field)."""
    if len(tokens) < 12 or not (tokens[0].isdigit() and tokens[1].isdigit()) or tokens[2] not in _TYPES:
        return None
    if with_root is None:
        with_root = len(tokens) >= 13 and re.fullmatch(r"-?\d+", tokens[4]) is not None
    base = 5 if with_root else 4
    if len(tokens) < base + 8:
        return None
    try:
        values = tokens[base : base + 8]
        return NcclRow(
            size=int(tokens[0]),
            count=int(tokens[1]),
            type=tokens[2],
            redop=tokens[3],
            root=int(tokens[4]) if with_root else None,
            oop_time_us=_number(values[0]),
            oop_algbw=_number(values[1]),
            oop_busbw=_number(values[2]),
            oop_wrong=_wrong(values[3]),
            ip_time_us=_number(values[4]),
            ip_algbw=_number(values[5]),
            ip_busbw=_number(values[6]),
            ip_wrong=_wrong(values[7]),
        )
    except ValueError:
        return None


def parse_all_reduce(log: str) -> NcclResult:
    """Parse the log of an ``all_reduce_perf`` run (stdout and stderr, NCCL_DEBUG=INFO lines
    interleaved, possibly cut anywhere). Never raises: what is missing stays None/empty."""
    rows: list[NcclRow] = []
    with_root: Optional[bool] = None
    avg: Optional[float] = None
    out_of_bounds: Optional[int] = None
    max_bytes: Optional[int] = None
    networks: list[str] = []
    provider: Optional[str] = None
    via: list[str] = []
    gdrdma = False
    socket_init = False
    warnings: list[str] = []
    verdict: Optional[str] = None
    for raw in log.splitlines():
        line = _TAG.sub("", raw.rstrip())
        if not line.strip():
            continue
        content = line.strip().lstrip("#").strip()
        if (m := _COLUMNS.match(content)) is not None:
            with_root = m.group(1) is not None
            continue
        if (m := _AVG.match(content)) is not None:
            try:
                avg = float(m.group(1))
            except ValueError:
                pass
            continue
        if (m := _OUT_OF_BOUNDS.match(content)) is not None:
            out_of_bounds = int(m.group(1))
            continue
        if (m := _MAX_BYTES.match(content)) is not None:
            max_bytes = int(m.group(1))
            continue
        if line.lstrip().startswith("#"):
            continue
        if line.startswith("rlinf-eks ") and re.search(r": (PASS|FAIL|FAILED)\b", line):
            verdict = line.strip()
            continue
        if "NCCL " in line or "NET/OFI" in line:
            if (m := _USING_NETWORK.search(line)) is not None:
                if m.group(1) not in networks:
                    networks.append(m.group(1))
            elif (m := _PROVIDER.search(line)) is not None:
                provider = provider or m.group(1)
            elif (m := _WARN.search(line)) is not None:
                if m.group(1) not in warnings:
                    warnings.append(m.group(1))
            elif _SOCKET_INIT.search(line):
                socket_init = True
            for m in _VIA_NET.finditer(line):
                via.append(m.group(1))
                gdrdma = gdrdma or m.group(2) is not None
            continue
        row = _row(line.split(), with_root)
        if row is not None:
            rows.append(row)
    named_other = [n for n in networks if n != "Socket"] or [v for v in via if v != "Socket"]
    socket_fallback = "Socket" in networks or "Socket" in via or (socket_init and not named_other)
    return NcclResult(
        rows=tuple(rows),
        max_size_busbw=max(rows, key=lambda r: r.size).oop_busbw if rows else None,
        avg_busbw=avg,
        network=networks[0] if networks else None,
        provider=provider,
        socket_fallback=socket_fallback,
        networks=tuple(networks),
        gdrdma=gdrdma,
        max_bytes=max_bytes,
        out_of_bounds=out_of_bounds,
        warnings=tuple(warnings),
        verdict=verdict,
    )
