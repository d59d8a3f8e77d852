"""Wire adapters: parse a wire document into the engine view, emit it back losslessly.

Each adapter module has `parse(...) -> Document`; `detect.parse_any` picks one for a file.
"""

from factrail.core.formats.base import Document, FormatError, WireDocument
from factrail.core.formats.detect import Loaded, dump_document, parse_any

__all__ = ["Document", "FormatError", "Loaded", "WireDocument", "dump_document", "parse_any"]
