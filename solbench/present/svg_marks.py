"""SVG charts that say what each point is: a ``<title>`` per mark (a browser shows it on hover), and
the same SVG made safe to inline in the HTML report, where those tooltips work (inside ``<img>`` they do not).

Matplotlib writes no ``<title>``: a chart tags a scatter with :func:`tooltips` (a group id and one
text per point), and :func:`with_titles` wraps each drawn point of that group in ``<g><title>``.
:func:`inline_svg` keeps only drawing elements and attributes (no script, no event handler, no link
out of the document) and gives every id a prefix, so several charts on one page keep their own.
"""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from markupsafe import Markup
from matplotlib.artist import Artist
from matplotlib.figure import Figure

SVG = "http://www.w3.org/2000/svg"
XLINK = "http://www.w3.org/1999/xlink"
ET.register_namespace("", SVG)
ET.register_namespace("xlink", XLINK)
_TOOLTIPS = "_solbench_tooltips"  # figure attribute: {group id: [title per point]}
_ids = itertools.count(1)
# What matplotlib's SVG backend writes; anything else is dropped from an inlined chart.
DRAWING = {"svg", "g", "defs", "path", "use", "clipPath", "rect", "circle", "ellipse", "line", "polyline", "polygon",
           "text", "tspan", "title", "image", "pattern", "linearGradient", "radialGradient", "stop", "mask"}
_SAFE_ATTR = re.compile(r"^(?!on)[a-zA-Z][\w:.-]*$")


def tooltips(fig: Figure, artist: Artist, titles: Sequence[str]) -> None:
    """Give each point of ``artist`` (a scatter, in drawing order) its hover text in SVG output."""
    gid = f"solbench-marks-{next(_ids)}"
    artist.set_gid(gid)
    getattr(fig, _TOOLTIPS, None) or setattr(fig, _TOOLTIPS, {})
    getattr(fig, _TOOLTIPS)[gid] = [str(t) for t in titles]


def has_tooltips(fig: Figure) -> bool:
    return bool(getattr(fig, _TOOLTIPS, None))


def with_titles(svg: bytes, fig: Figure) -> bytes:
    """The SVG with a ``<title>`` around each point tagged by :func:`tooltips` (unchanged without any)."""
    marks = getattr(fig, _TOOLTIPS, None)
    if not marks:
        return svg
    # Comments kept: matplotlib writes each text there when it draws the glyphs as paths (a file's only text).
    root = ET.fromstring(svg, parser=ET.XMLParser(target=ET.TreeBuilder(insert_comments=True)))
    parents = {child: parent for parent in root.iter() for child in parent}
    for group in root.iter(f"{{{SVG}}}g"):
        titles = marks.get(group.get("id", ""))
        if titles is None:
            continue
        shapes = list(_drawn(group))
        if len(shapes) != len(titles):
            continue  # drawn otherwise than one shape per point: no titles rather than wrong ones
        for shape, text in zip(shapes, titles, strict=True):
            parent = parents[shape]
            wrap = ET.Element(f"{{{SVG}}}g")
            ET.SubElement(wrap, f"{{{SVG}}}title").text = text
            parent.insert(list(parent).index(shape), wrap)
            parent.remove(shape)
            wrap.append(shape)
    return b'<?xml version="1.0" encoding="utf-8" standalone="no"?>\n' + ET.tostring(root, encoding="utf-8",
                                                                                    xml_declaration=False)


def _drawn(el: ET.Element):  # noqa: ANN202 - a generator of elements
    """The shapes an element draws, in order; not the shared ones it only defines (``<defs>``)."""
    for child in el:
        if child.tag in (f"{{{SVG}}}use", f"{{{SVG}}}path"):
            yield child
        elif child.tag != f"{{{SVG}}}defs":
            yield from _drawn(child)


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def inline_svg(svg: bytes, prefix: str, label: str) -> Markup:
    """``svg`` as markup to place in an HTML page: drawing elements only, ids prefixed, sized by its box."""
    root = ET.fromstring(svg)
    for parent in list(root.iter()):
        for child in list(parent):
            if _local(child.tag) not in DRAWING:
                parent.remove(child)
    for el in root.iter():
        for name in list(el.attrib):
            value = el.attrib[name]
            local = _local(name)
            if not _SAFE_ATTR.match(local) or (local == "href" and not value.startswith("#")) \
                    or "javascript:" in value.lower():
                del el.attrib[name]
            elif local == "id":
                el.attrib[name] = f"{prefix}-{value}"
            elif local == "href":
                el.attrib[name] = f"#{prefix}-{value[1:]}"
            elif "url(#" in value:
                el.attrib[name] = value.replace("url(#", f"url(#{prefix}-")
    for attr in ("width", "height"):  # the page sizes it (max-width: 100%); the viewBox keeps its shape
        root.attrib.pop(attr, None)
    # matplotlib's own stylesheet (``*{stroke-linejoin: round; ...}``) would style the whole page: it is
    # dropped above, and its two inherited properties are set on the chart instead.
    root.set("style", "stroke-linejoin: round; stroke-linecap: butt")
    root.set("role", "img")
    root.set("aria-label", label)
    root.set("class", "chart")
    text = ET.tostring(root, encoding="unicode")
    # Inside HTML the parser puts <svg> in its namespace and knows xlink:href: no namespace URLs needed.
    head, rest = text.split(">", 1)
    text = re.sub(r' xmlns(:\w+)?="[^"]*"', "", head) + ">" + rest
    return Markup(text)  # noqa: S704 - rebuilt from an allow-list above
