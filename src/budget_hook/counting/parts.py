"""Content parts as the provider receives them, whatever the client called them (pure; never raises).

A part is priced by what LiteLLM sends for it, not by its ``type``: LiteLLM reads a part's declared media type
(``format``) over its data URL's, and sends what is not an image as the file it is. On the way to Claude an
``image_url`` carrying a PDF or a text file is a document (``factory._is_anthropic_document_data_uri``), and a
``file`` whose ``format`` says PDF is one whatever its data URL says (``convert_to_anthropic_image_obj``); to
Gemini any data URL is ``inline_data`` of its type, and a ``gs://`` or Files API URL, or one with a ``format``,
is a ``file_data`` reference (``vertex_ai/gemini/transformation.py``); an Anthropic ``document`` part on
``/chat/completions`` goes to Claude and Bedrock as it is. Priced as an image, a 100-page PDF was 1,577 tokens
against 300,023 as the PDF (an attack review, 2026-12-06). ``sent_as(part)`` gives the parts the counter
prices instead (a ``file`` part of the real type, a reference by URL, a document's parts), or None.

The view-only part types live here too: ``ViewPart`` is a ``str`` subclass no JSON a client sends can make.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

from ..errors import MalformedRequestError
from . import media
from .canonical import canonical_json


class ViewPart(str):
    """The ``type`` of a content part only the gateway's own views produce (a ``str`` subclass: no JSON a
    client sends can make one, so a client cannot have its text priced as one of these)."""


#: a replayed Gemini thought signature, priced per base64 character (``signature``)
THOUGHT_SIGNATURE = ViewPart("thought_signature")
#: a prompt the provider adds on its own for what the request asks (Anthropic citations): ``tokens``
HIDDEN_PROMPT = ViewPart("hidden_prompt")
#: the ``type`` of a tool the Responses API declared: it bills tools its own way (``responses_tools_*``); and
#: the key a ``/v1/responses`` view carries, tools or not (gpt-5.x bills its items more: ``responses_extra``)
RESPONSES_FUNCTION, RESPONSES_VIEW = ViewPart("function"), "budget_hook_responses_view"
#: a part LiteLLM sends as one of its ``parts`` depending on the provider: priced as the dearest
ONE_OF = ViewPart("one_of")
#: an image or a file as ``sent_as`` found LiteLLM sends it: priced as it is (never read again by ``sent_as``)
SENT_IMAGE, SENT_FILE = ViewPart("image_url"), ViewPart("file")

_IMAGE_DETAILS = frozenset({"auto", "low", "high"})


def image_detail(detail: Any, where: str) -> str:
    """An image's ``detail``: ``auto`` when absent or empty, else one of auto, low or high; anything else (an
    object or a list too: unhashable) is a 400 naming ``{where}.detail``."""
    if detail is None or detail == "":
        return "auto"
    if not isinstance(detail, str) or detail not in _IMAGE_DETAILS:
        raise MalformedRequestError(f"{where}.detail", "an invalid detail value (expected auto, low or high)")
    return detail


#: part types whose media LiteLLM may send as something else (``sent_as``); ``input_file`` and ``image`` as Gemini
#: reads a tool result's (``convert_to_gemini_tool_call_result``: a top-level ``file_data``, an Anthropic source)
RETYPED = ("document", "image_url", "input_image", "file", "input_file", "image")  # a tuple: no error on an object
#: URLs whose content the provider fetches as a file (Gemini's Files API); ``gs://`` ones unless an image's name
FILE_URLS = ("https://generativelanguage.googleapis.com/", "http://generativelanguage.googleapis.com/")
IMAGE_NAMES = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".heic", ".heif", ".bmp", ".tif", ".tiff")


def sent_as(part: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The parts LiteLLM sends for ``part`` when they are not what its ``type`` says (see the module), else None.

    A data URL is priced as the dearer of what the part declares (``format``, or Gemini's ``mime_type`` and
    ``content_type``) and what the URL says (``_typed``); it is found where LiteLLM finds it (``split("data:")[1]``:
    after any text), unless the URL is one LiteLLM fetches."""
    kind = part.get("type")
    if kind == "document":
        return document_parts(part)
    if kind == "image":  # as Gemini reads a tool result's inline content, or the JSON it is
        if source(part).get("type") != "base64":
            return None
        media_part = image_part(part)  # sent as the media it holds wherever it is read (Gemini, Claude)
        return sent_as(media_part) or [{**media_part, "type": SENT_IMAGE}]
    inline = tool_file_data(part) if kind in ("file", "input_file") else None
    nested = part.get("file")
    if inline is not None and (kind == "input_file" or not isinstance(nested, Mapping) or part.get("file_data")):
        # a spelling only Gemini's tool results read as a file (``convert_to_gemini_tool_call_result``: a top-level
        # ``file_data``, else the nested one, else a ``file`` string), sent inline; elsewhere the part it is
        rest = {key: value for key, value in part.items() if key != "file_data"}
        as_is = (sent_as(rest) or [rest]) if kind == "file" and isinstance(nested, Mapping) else \
            [{"type": "text", "text": canonical_json(part)}]
        media_part = {"type": "file", "file": {"file_data": inline, **({"format": part["format"]} if "format" in part
                                                                        else {})}}
        return [{"type": ONE_OF, "parts": [*as_is, *(sent_as(media_part) or [media_part])]}]
    if kind in ("image_url", "input_image"):
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
        declared = _declared(image) if isinstance(image, Mapping) else ""
        if not isinstance(url, str):
            return None  # the counter's own 400
        found = readings(url)
        if found:
            own = media.data_type(url)  # an image as it says: priced by the counter as it is
            plain = found == [url] and own.startswith("image/") and declared in ("", own)
            return None if plain else _typed(found, declared, {})
        if declared.startswith("image/"):
            return None
        if declared or url.startswith(FILE_URLS) or (url.startswith("gs://") and not url.lower().endswith(IMAGE_NAMES)):
            return [{"type": "file", "file": {"file_id": url}}]  # content the request does not carry
        return None
    file = part.get("file")
    if kind != "file" or not isinstance(file, Mapping):
        return None
    data = file.get("file_data")  # Gemini and Bedrock send ``file_id or file_data``: a data URL in either is content
    found = [url for value in (data, file.get("file_id")) if isinstance(value, str) for url in readings(value)]
    declared = _declared(file)
    if not found or (found == [data] and isinstance(data, str) and declared in ("", media.data_type(data))):
        return None
    return _typed(found, declared, {key: file[key] for key in ("video_metadata",) if key in file})


def tool_file_data(part: Mapping[str, Any]) -> str | None:
    """The data Gemini's tool results send inline for a ``file`` or ``input_file`` part (LiteLLM's
    ``convert_to_gemini_tool_call_result``: ``file_data``, else ``file.file_data``, else ``file`` as a string), or
    None. An attack review (2026-12-06): a 100-page PDF spelled these ways was counted 41-174 tokens, 25,820 sent."""
    nested = part.get("file")
    data = part.get("file_data") or (nested.get("file_data") if isinstance(nested, Mapping) else nested)
    return data if isinstance(data, str) and data else None


def _typed(found: list[str], declared: str, keep: dict[str, Any]) -> list[dict[str, Any]]:
    """Data URLs sent as their own type or as the one declared (Gemini sends the declared type, Claude's tool results
    the data URL's): the part of that type, or ``ONE_OF`` them all, priced as the dearest (``keep``: a file's other
    keys the price reads, ``video_metadata``)."""
    options = []
    for data in found:
        own = media.data_type(data)
        for kind in list(dict.fromkeys(t for t in (declared, own) if t)) or [""]:
            url = data if kind in ("", own) else retyped(data, kind)
            options.append({"type": SENT_IMAGE, "image_url": {"url": url}} if kind.startswith("image/") else
                           {"type": SENT_FILE, "file": {"file_data": url, **keep}})
    return options if len(options) == 1 else [{"type": ONE_OF, "parts": options}]


def readings(value: str) -> list[str]:
    """The data URLs LiteLLM may take out of ``value``, depending on the provider (each reading as
    ``data:<type>;base64,<payload>``, the type "" when it names none): the URL from its first ``data:`` as it stands
    (``_data_url``); Claude's and Gemini's ``split("data:")[1].split(";base64,")`` (``convert_to_anthropic_image_obj``:
    the type is whatever precedes ``;base64,``); Bedrock's ``split(",")`` of any string holding ``base64``
    (``_parse_base64_image``: the type from ``data:<type>;base64``, else ``image/jpeg``). An attack review
    (2026-12-06) sent ``data:,;base64,<text>`` with ``format: text/plain``: Claude read 89,906 tokens of text, the
    count 5,432 by size."""
    header = value[5:value.find(",")] if value.startswith("data:") else ""
    kind = header.removesuffix(";base64")
    if kind and kind != header and kind == _media_type(kind) and "\\/" not in kind and "\n" not in kind \
            and value.find("data:", 5) < 0 and value.count(",") == 1:
        return [value]  # the common spelling (data:<type>;base64,<payload>), read alike by every provider
    found = []
    data = _data_url(value)
    if data is not None:
        found.append(data)
        piece = data[5:].split("data:")[0]
        if piece.count(";base64,") == 1:
            kind, payload = piece.split(";base64,")
            found.append(_canonical(kind.replace("\\/", "/"), payload))
    if "base64" in value and value.count(",") == 1:
        meta, payload = value.split(",")
        at = meta.find(";base64") if meta.startswith("data:") else -1
        found.append(_canonical(meta[5:at] if at >= 5 and "\n" not in meta[5:at] else "image/jpeg", payload))
    return list(dict.fromkeys(found))


def _canonical(kind: str, payload: str) -> str:
    kind = _media_type(kind)
    return f"data:{'' if ',' in kind else kind};base64,{payload}"


def unreadable_as_sent(part: Any) -> str | None:
    """Why the size of what LiteLLM sends for a chat part cannot be known here (``media.unreadable`` of the parts
    ``sent_as`` gives, or of the part itself), or None."""
    kind = part.get("type") if isinstance(part, Mapping) else None
    instead = sent_as(part) if kind in RETYPED and type(kind) is not ViewPart else part.get("parts") \
        if type(kind) is ViewPart and kind == ONE_OF else None
    if isinstance(instead, list):
        return next((why for one in instead if (why := unreadable_as_sent(one))), None)
    return media.unreadable(part)


def _declared(holder: Mapping[str, Any]) -> str:
    """The media type a part declares (``format``; Gemini reads ``mime_type`` and ``content_type`` too)."""
    return next((found for key in ("format", "mime_type", "content_type") if (found := _media_type(holder.get(key)))),
                "")


def _data_url(url: str) -> str | None:
    """The data URL LiteLLM reads in ``url``: from its first ``data:`` on, unless the URL is one it fetches."""
    if url.startswith("data:"):
        return url
    at = -1 if url.startswith("http") else url.find("data:")  # Claude's and Gemini's own test: only http is fetched
    return url[at:] if at > 0 else None


def _media_type(value: Any) -> str:
    return value.partition(";")[0].strip().lower() if isinstance(value, str) else ""


def retyped(url: str, media_type: str) -> str:
    """A data URL with ``media_type`` in place of its own (its parameters and payload kept)."""
    header, _, payload = url.partition(",")
    params = header[5:].split(";")[1:]
    return "data:" + ";".join([media_type, *params]) + "," + payload


# --- Anthropic documents --------------------------------------------------------------------------------

#: what citations cost on top of the content (measured: +556 for a cited text document, +464 for a cited
#: ``search_result``, +1,250 for a cited one-page PDF): Anthropic adds a citation prompt and chunks the text
CITATIONS_TOKENS = 560
CITED_PDF_PAGE_TOKENS = 700


def source(block: Mapping[str, Any]) -> Mapping[str, Any]:
    value = block.get("source")
    return value if isinstance(value, Mapping) else {}


def image_part(block: Mapping[str, Any]) -> dict[str, Any]:
    """An Anthropic ``image`` block as a chat ``image_url`` part."""
    found = source(block)
    if found.get("type") == "base64":
        url = f"data:{found.get('media_type', 'image/png')};base64,{found.get('data', '')}"
    else:
        url = str(found.get("url", ""))
    return {"type": "image_url", "image_url": {"url": url}}


def citations(block: Mapping[str, Any], data: str | None = None) -> list[dict[str, Any]]:
    """The prompt Anthropic adds for a block's enabled citations, as a ``HIDDEN_PROMPT`` part (or none)."""
    asked = block.get("citations")
    if not (isinstance(asked, Mapping) and asked.get("enabled") is True):
        return []
    pages = media.pdf_page_count(data) if data and "application/pdf" in data[:40] else None
    return [{"type": HIDDEN_PROMPT, "tokens": CITATIONS_TOKENS + (pages or 0) * CITED_PDF_PAGE_TOKENS}]


def document_parts(block: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A ``document`` block as chat parts, for every source type Anthropic accepts: ``base64`` (a PDF or a
    text file, counted as what it is), ``text``, ``content`` (its own text and image blocks); ``url`` and
    ``file`` reference content the request does not carry (counted at a flat estimate, flagged)."""
    found = source(block)
    kind = found.get("type")
    title = block.get("title") or found.get("media_type", "text/plain")
    extra = [{"type": "text", "text": str(block["context"])}] if block.get("context") else []
    if kind == "base64":
        data = f"data:{found.get('media_type', 'application/pdf')};base64,{found.get('data', '')}"
        return [{"type": "file", "file": {"file_data": data}}, *extra, *citations(block, data)]
    extra += citations(block)
    if kind == "text":
        return [{"type": "text", "text": _framed(title, str(found.get("data", "")))}, *extra]
    if kind == "content" and isinstance(found.get("content"), (str, list)):
        inner = found["content"]
        blocks = [{"type": "text", "text": inner}] if isinstance(inner, str) else inner
        texts = [str(b.get("text", "")) if _is_text(b) else "" for b in blocks]
        images = [image_part(b) for b in blocks if isinstance(b, Mapping) and b.get("type") == "image"]
        others = [canonical_json(b) for b in blocks if not _is_text(b) and not (isinstance(b, Mapping)
                                                                             and b.get("type") == "image")]
        return [{"type": "text", "text": _framed(title, "\n".join([*texts, *others]))}, *images, *extra]
    return [{"type": "file", "file": {"file_id": canonical_json(found)}}, *extra]


def _is_text(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "text"


def _framed(title: Any, text: str) -> str:
    # Anthropic wraps documents in XML-like framing with their source; count it too.
    return f'<document index="1">\n<source>{title}</source>\n<document_content>{text}</document_content>\n</document>'


def gemini_media(data: Mapping[str, Any], video: Any = None) -> dict[str, Any]:
    """Gemini's ``inlineData`` as a chat part (``video``: the part's ``videoMetadata``, whose ``fps`` is priced)."""
    mime = str(data.get("mimeType") or data.get("mime_type") or "application/octet-stream")
    url = f"data:{mime};base64,{data.get('data', '')}"
    if mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "file", "file": {"file_data": url, **({"video_metadata": video} if isinstance(video, Mapping)
                                                          else {})}}


def gemini_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """One Gemini part as the chat part it is priced as: its text, its inline media, a file reference (by its JSON),
    else its JSON."""
    data = part.get("inlineData") or part.get("inline_data")
    file = part.get("fileData") or part.get("file_data")
    # an empty ``text`` beside media is unset to Gemini, which reads (and bills) the media
    if isinstance(part.get("text"), str) and (part["text"] or not isinstance(data or file, Mapping)):
        return {"type": "text", "text": part["text"]}
    if isinstance(data, Mapping):
        return gemini_media(data, part.get("videoMetadata") or part.get("video_metadata"))
    if isinstance(file, Mapping):
        return {"type": "file", "file": {"file_id": canonical_json(file)}}
    return {"type": "text", "text": canonical_json(part)}


#: the media keys of a Gemini part a JSON thinking text may spell (``thought_parts``)
_THOUGHT_MEDIA = ("inlineData", "inline_data", "fileData", "file_data")


def thought_parts(blocks: Any, family: str) -> list[dict[str, Any]]:
    """The media parts LiteLLM 1.103 sends Gemini (``family``) for an assistant's thinking blocks whose text is a JSON
    object (``PartType(thoughtSignature=..., **json.loads(thinking))``: inline media, a file reference), as chat
    parts; their JSON text is counted besides. An attack review (2026-12-06): a 100-page PDF counted 187 tokens."""
    found = []
    for block in blocks if isinstance(blocks, list) and family == "gemini" else ():
        text = block.get("thinking") if isinstance(block, Mapping) and block.get("type") == "thinking" else None
        if isinstance(text, str) and block.get("signature") is not None and text.lstrip().startswith("{"):
            with contextlib.suppress(ValueError, RecursionError):
                value = json.loads(text)
                if isinstance(value, Mapping) and any(isinstance(value.get(key), Mapping) for key in _THOUGHT_MEDIA):
                    found.append(gemini_part({key: value[key] for key in _THOUGHT_MEDIA if key in value}))
    return found
