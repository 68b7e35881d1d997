//! Reading one YAML document into a [`Value`] by the YAML 1.2 core schema.
//!
//! Plain scalars resolve as the core schema says, and no other way: `0022` is the integer 22
//! (YAML 1.1's octal is gone; octal is `0o22`), and `1:30`, `0b11`, `8_0`, `yes` and `on` are
//! strings. Quoted scalars are strings. The core schema's tags (`!!str`, `!!int`, `!!float`,
//! `!!bool`, `!!null`, `!!seq`, `!!map`) and the non-specific `!` are honoured; any other tag is
//! an error. Aliases copy their anchored node, within [`MAX_COPIED_NODES`]; YAML 1.1's merge key
//! `<<` is an error rather than a plain key. A mapping may not repeat a key, keys must be
//! scalars, collections nest at most [`MAX_DEPTH`] levels and integers fit 128 bits. Every error
//! names a line and (but for duplicate keys, which name both lines) a column.

mod mapping;
pub mod repr;
mod scalar;
#[cfg(test)]
mod tests;

use std::borrow::Cow;

use rustc_hash::FxHashMap;
use saphyr_parser::{Event, Marker, Parser, ScalarStyle, StrInput, Tag};

use mapping::OpenMap;
use scalar::CoreTag;

/// Collections nested deeper than this are refused, before they are read.
pub const MAX_DEPTH: usize = 200;
/// The most nodes one document may copy, into its anchors and out of them by aliases: against
/// documents that expand exponentially ("billion laughs") or anchor each level of a deep node.
pub const MAX_COPIED_NODES: usize = 1_000_000;

/// A YAML node. Mappings keep their keys in document order; keys are scalars.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Value>),
    Map(Vec<(Value, Value)>),
}

impl Value {
    fn is_collection(&self) -> bool {
        matches!(self, Value::Seq(_) | Value::Map(_))
    }

    /// The nodes in this value, itself included.
    fn node_count(&self) -> usize {
        match self {
            Value::Seq(items) => 1 + items.iter().map(Value::node_count).sum::<usize>(),
            Value::Map(entries) => 1 + entries.iter().map(|(_, value)| 1 + value.node_count()).sum::<usize>(),
            _ => 1,
        }
    }

    /// How many collections deep this value goes: 0 for a scalar.
    fn depth(&self) -> usize {
        match self {
            Value::Seq(items) => 1 + items.iter().map(Value::depth).max().unwrap_or(0),
            Value::Map(entries) => 1 + entries.iter().map(|(_, value)| value.depth()).max().unwrap_or(0),
            _ => 0,
        }
    }
}

/// Why a text is not a document this loader reads. Lines and columns count from 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum YamlError {
    #[error("line {line}, column {column}: {problem}")]
    Invalid { line: usize, column: usize, problem: String },
    #[error("line {line}: duplicate key {key} (first at line {first_line})")]
    DuplicateKey { line: usize, column: usize, key: String, first_line: usize },
}

/// The one document in `text`, or `Value::Null` for a text without one (empty, or only comments).
pub fn load(text: &str) -> Result<Value, YamlError> {
    Loader::new(text, None).stream()
}

/// What [`load_streaming`] hands over while it reads, in document order.
#[derive(Debug, Clone, PartialEq)]
pub enum Streamed {
    /// The sequence under the key begins: the root mapping's entries before it.
    Head(Vec<(Value, Value)>),
    /// One item of that sequence, complete.
    Item(Value),
}

/// [`load`], handing the items of the root mapping's sequence under `key` to `sink` as each
/// is read (after a [`Streamed::Head`]), so that a reader can take them while the rest of the
/// text is read. The document comes back with that sequence empty. A sequence with an anchor
/// (which an alias may copy) or under a root that is not a mapping is read as [`load`] reads it,
/// and nothing is handed over. An error may come after some items were.
pub fn load_streaming(text: &str, key: &str, sink: &mut dyn FnMut(Streamed)) -> Result<Value, YamlError> {
    Loader::new(text, Some(Stream { key, sink, open: false })).stream()
}

fn invalid(at: Marker, problem: impl Into<String>) -> YamlError {
    YamlError::Invalid { line: at.line(), column: at.col() + 1, problem: problem.into() }
}

struct Loader<'input, 'stream> {
    parser: Parser<'input, StrInput<'input>>,
    /// The collections being read, outermost first.
    open: Vec<OpenCollection>,
    /// Anchored nodes by the parser's anchor id, with their node count and depth.
    anchors: FxHashMap<usize, (Value, usize, usize)>,
    /// Nodes copied into anchors and out of them so far.
    copied_nodes: usize,
    stream: Option<Stream<'stream>>,
}

/// Where a streamed sequence's items go, and whether it is being read.
struct Stream<'stream> {
    key: &'stream str,
    sink: &'stream mut dyn FnMut(Streamed),
    open: bool,
}

struct OpenCollection {
    items: Items,
    anchor: usize,
    start: Marker,
}

enum Items {
    Seq(Vec<Value>),
    Map(OpenMap),
}

impl<'input, 'stream> Loader<'input, 'stream> {
    fn new(text: &'input str, stream: Option<Stream<'stream>>) -> Self {
        Loader { parser: Parser::new_from_str(text), open: Vec::new(), anchors: FxHashMap::default(), copied_nodes: 0, stream }
    }

    fn next(&mut self) -> Result<(Event<'input>, Marker), YamlError> {
        match self.parser.next_event() {
            Some(Ok((event, span))) => Ok((event, span.start)),
            // The scanner reads flow collections ahead of the parser and stops at its own limit
            // of 255 levels, which can come before the loader sees level 201.
            Some(Err(err)) if err.info() == "recursion limit exceeded" => Err(invalid(*err.marker(), too_deep())),
            Some(Err(err)) => Err(invalid(*err.marker(), err.info())),
            None => unreachable!("the loader stops at the end of the stream"),
        }
    }

    fn stream(mut self) -> Result<Value, YamlError> {
        let mut document = None;
        loop {
            match self.next()? {
                (Event::StreamEnd, _) => return Ok(document.unwrap_or(Value::Null)),
                (Event::DocumentStart(_), at) if document.is_some() => return Err(invalid(at, "expected one document, found a second")),
                (Event::DocumentStart(_), _) => document = Some(self.document()?),
                _ => {} // the stream's start, a document's end
            }
        }
    }

    /// Reads events up to the end of the document's root node.
    fn document(&mut self) -> Result<Value, YamlError> {
        loop {
            let (event, at) = self.next()?;
            let (node, start) = match event {
                Event::Scalar(text, style, anchor, tag) => (self.scalar(text, style, anchor, tag, at)?, at),
                Event::SequenceStart(anchor, tag) => {
                    self.open_collection(Items::Seq(Vec::new()), anchor, tag, CoreTag::Seq, at)?;
                    continue;
                }
                Event::MappingStart(anchor, tag) => {
                    self.open_collection(Items::Map(OpenMap::default()), anchor, tag, CoreTag::Map, at)?;
                    continue;
                }
                Event::SequenceEnd | Event::MappingEnd => self.close_collection()?,
                Event::Alias(id) => (self.alias(id, at)?, at),
                _ => unreachable!("a document holds nodes"),
            };
            if let Some(root) = self.place(node, start)? {
                return Ok(root);
            }
        }
    }

    fn scalar(&mut self, text: Cow<'input, str>, style: ScalarStyle, anchor: usize, tag: Option<Cow<'input, Tag>>, at: Marker) -> Result<Value, YamlError> {
        let value = match tag {
            Some(tag) => scalar::resolve_tagged(&text, core_tag(&tag, at)?).map_err(|problem| invalid(at, problem))?,
            None if style != ScalarStyle::Plain => Value::Str(text.into_owned()),
            None if text == "<<" && self.expects_key() => return Err(invalid(at, "merge keys (<<) are YAML 1.1, not 1.2: write the keys out")),
            None => scalar::resolve_plain(text).map_err(|problem| invalid(at, problem))?,
        };
        self.remember(anchor, &value, at)?;
        Ok(value)
    }

    fn open_collection(&mut self, items: Items, anchor: usize, tag: Option<Cow<'input, Tag>>, kind: CoreTag, at: Marker) -> Result<(), YamlError> {
        if let Some(tag) = tag {
            let tag = core_tag(&tag, at)?;
            if tag != kind && tag != CoreTag::NonSpecific {
                let node = if kind == CoreTag::Seq { "sequence" } else { "mapping" };
                return Err(invalid(at, format!("{} on a {node}", tag.name())));
            }
        }
        if self.open.len() == MAX_DEPTH {
            return Err(invalid(at, too_deep()));
        }
        let streamed = matches!(items, Items::Seq(_)) && anchor == 0 && self.opens_streamed_sequence();
        self.open.push(OpenCollection { items, anchor, start: at });
        if streamed {
            let (Some(stream), Some(OpenCollection { items: Items::Map(root), .. })) = (self.stream.as_mut(), self.open.first()) else {
                unreachable!("checked by opens_streamed_sequence")
            };
            stream.open = true;
            (stream.sink)(Streamed::Head(root.entries().to_vec()));
        }
        Ok(())
    }

    /// Whether a sequence opened now is the one to stream: the value of the key under the root mapping.
    fn opens_streamed_sequence(&self) -> bool {
        let Some(stream) = &self.stream else { return false };
        matches!(self.open.as_slice(), [OpenCollection { items: Items::Map(root), .. }] if matches!(root.pending_key(), Some(Value::Str(k)) if k == stream.key))
    }

    /// The streamed sequence, if it is the innermost collection open.
    fn streaming_into(&mut self) -> Option<&mut Stream<'stream>> {
        self.stream.as_mut().filter(|stream| stream.open && self.open.len() == 2)
    }

    fn close_collection(&mut self) -> Result<(Value, Marker), YamlError> {
        if let Some(stream) = self.streaming_into() {
            stream.open = false;
        }
        let closed = self.open.pop().expect("an end event closes an open collection");
        let value = match closed.items {
            Items::Seq(items) => Value::Seq(items),
            Items::Map(map) => Value::Map(map.finish()),
        };
        self.remember(closed.anchor, &value, closed.start)?;
        Ok((value, closed.start))
    }

    fn alias(&mut self, id: usize, at: Marker) -> Result<Value, YamlError> {
        // The parser knows every anchor it has seen, including one on a node still open.
        let &(_, nodes, depth) = self.anchors.get(&id).ok_or_else(|| invalid(at, "an alias inside the node it refers to"))?;
        if self.open.len() + depth > MAX_DEPTH {
            return Err(invalid(at, too_deep()));
        }
        self.count_copies(nodes, at)?;
        Ok(self.anchors[&id].0.clone())
    }

    fn remember(&mut self, anchor: usize, value: &Value, at: Marker) -> Result<(), YamlError> {
        // Anchor ids start at 1; 0 is a node without one.
        if anchor != 0 {
            let nodes = value.node_count();
            self.count_copies(nodes, at)?;
            self.anchors.insert(anchor, (value.clone(), nodes, value.depth()));
        }
        Ok(())
    }

    fn count_copies(&mut self, nodes: usize, at: Marker) -> Result<(), YamlError> {
        self.copied_nodes += nodes;
        if self.copied_nodes > MAX_COPIED_NODES {
            return Err(invalid(at, format!("anchors and aliases copy more than {MAX_COPIED_NODES} nodes")));
        }
        Ok(())
    }

    fn expects_key(&self) -> bool {
        matches!(self.open.last(), Some(OpenCollection { items: Items::Map(map), .. }) if map.expects_key())
    }

    /// Puts a complete node into the collection around it; the root comes back.
    fn place(&mut self, node: Value, start: Marker) -> Result<Option<Value>, YamlError> {
        if let Some(stream) = self.streaming_into() {
            (stream.sink)(Streamed::Item(node));
            return Ok(None);
        }
        match self.open.last_mut().map(|open| &mut open.items) {
            None => return Ok(Some(node)),
            Some(Items::Seq(items)) => items.push(node),
            Some(Items::Map(map)) if !map.expects_key() => map.add_value(node),
            Some(Items::Map(_)) if node.is_collection() => return Err(invalid(start, "a mapping key must be a scalar, not a collection")),
            Some(Items::Map(map)) => map.add_key(node, start.line(), start.col() + 1)?,
        }
        Ok(None)
    }
}

fn too_deep() -> String {
    format!("nested deeper than {MAX_DEPTH} levels")
}

fn core_tag(tag: &Tag, at: Marker) -> Result<CoreTag, YamlError> {
    CoreTag::from_parts(&tag.handle, &tag.suffix).ok_or_else(|| {
        let shown = scalar::shown_tag(&tag.handle, &tag.suffix);
        invalid(at, format!("unknown tag {shown}: only the core schema's !!str, !!int, !!float, !!bool, !!null, !!seq and !!map"))
    })
}
