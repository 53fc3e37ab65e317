"""stream-ctx: retrieval events in, small, lossless, token-counted prompt context out."""

from stream_ctx.core.accumulator import AddResult, BundleAccumulator, ContextItem, RankedItem
from stream_ctx.core.assembler import Assembly, DagContextAssembler
from stream_ctx.core.bundle import Bundle, BundleItem, BundleStats
from stream_ctx.core.codec import decode_event, encode_bundle
from stream_ctx.core.config import PRESETS, BundleConfig, bundle_config_from_table
from stream_ctx.core.dag import SharedAttribute, StateDag, block_id
from stream_ctx.core.events import End, Event, Finalize, Retrieval, RetrievedItem
from stream_ctx.core.processor import ContextProcessor
from stream_ctx.core.reader import ContextSyntaxError, ReadItem, read_context
from stream_ctx.core.rebuild import DeltaBaseError, rebuild_full
from stream_ctx.core.render import READING_GUIDE
from stream_ctx.core.scoring import priority, rank_key, recency
from stream_ctx.core.tokenizer import TiktokenTokenizer, Tokenizer, get_tokenizer
from stream_ctx.errors import ConfigError, InvalidEventError, StreamCtxError

__all__ = (
    "PRESETS",
    "READING_GUIDE",
    "AddResult",
    "Assembly",
    "Bundle",
    "BundleAccumulator",
    "BundleConfig",
    "BundleItem",
    "BundleStats",
    "ConfigError",
    "ContextItem",
    "ContextProcessor",
    "ContextSyntaxError",
    "DagContextAssembler",
    "DeltaBaseError",
    "End",
    "Event",
    "Finalize",
    "InvalidEventError",
    "RankedItem",
    "ReadItem",
    "Retrieval",
    "RetrievedItem",
    "SharedAttribute",
    "StateDag",
    "StreamCtxError",
    "TiktokenTokenizer",
    "Tokenizer",
    "block_id",
    "bundle_config_from_table",
    "decode_event",
    "encode_bundle",
    "get_tokenizer",
    "priority",
    "rank_key",
    "read_context",
    "rebuild_full",
    "recency",
)
