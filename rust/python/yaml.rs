//! `load_yaml`: the core reads the document without the GIL, then it becomes Python objects.
//! `stream_yaml`: the core reads it on a thread of its own, handing over the items of one
//! sequence as it goes, while Python takes them, and the rules of each item that are plainly
//! valid.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, TryRecvError};
use std::sync::{Mutex, MutexGuard};

use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use super::plain_rules::{make_rules, MadeRules, RuleSlots, RuleVocabulary, SharedTuples, TenantClasses};
use super::{internal_error, panic_message, without_gil, IsolaneError};
use crate::error::CoreError;
use crate::memory;
use crate::plain_rules::{plain_rules, PlainRule, Vocabulary};
use crate::yaml::{self, repr::python_repr, Streamed, Value, YamlError};

/// The one document in `text` as dicts, lists, strings, ints, floats, bools and None.
#[pyfunction]
pub(super) fn load_yaml<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    let value = without_gil(py, || yaml::load(text))?.map_err(CoreError::from)?;
    let loaded = to_python(py, &value, &mut RecentStrings::new());
    drop(value);
    memory::release_free_heap(); // the parsed tree is gone
    loaded
}

/// Starts reading the document in `text` on a thread of its own and returns at once: the
/// items of the root mapping's sequence under `key` can be taken while the rest is read. With
/// `rules`, the reader also reads each item's plainly valid rules (`YamlStream.plain_rules`).
#[pyfunction]
#[pyo3(signature = (text, key, rules = None))]
pub(super) fn stream_yaml(text: String, key: String, rules: Option<RuleVocabulary>) -> PyResult<YamlStream> {
    let (sender, arriving) = channel();
    let (stream_alive, stream_dropped) = channel::<()>();
    let streamed_key = key.clone();
    let vocabulary = rules.map(Vocabulary::from);
    let reader = move || {
        let read = catch_unwind(AssertUnwindSafe(|| {
            yaml::load_streaming(&text, &streamed_key, &mut |part| {
                let message = match part {
                    Streamed::Head(entries) => Message::Head(entries),
                    Streamed::Item(item) => {
                        let plain = vocabulary.as_ref().and_then(|vocabulary| plain_rules(&item, vocabulary));
                        Message::Item(repr_digest(&item), plain, item)
                    }
                };
                drop(sender.send(message));
            })
        }));
        let end = match read {
            Ok(read) => read.map_err(Failure::Yaml),
            Err(panic) => Err(Failure::Panic(panic_message(&*panic).to_owned())),
        };
        drop(sender.send(Message::End(end))); // nobody waits for it if the stream is gone
        let _ = stream_dropped.recv(); // Err once the stream, and every item it kept, is gone
                                       // The items were freed on Python's thread: about 45 MiB at 100,000 tenants otherwise stays.
        memory::release_thread_heap();
    };
    std::thread::Builder::new()
        .name("isolane-yaml".into())
        .spawn(reader)
        .map_err(|err| IsolaneError::new_err(format!("cannot start a thread to read the YAML document: {err}")))?;
    let inflow = Inflow {
        arriving: Some(arriving),
        head: None,
        items: Vec::new(),
        digests: Vec::new(),
        plain_rules: Vec::new(),
        end: None,
        strings: RecentStrings::new(),
        shared: SharedTuples::default(),
    };
    Ok(YamlStream { key, inflow: Mutex::new(inflow), _reader_waits: stream_alive })
}

enum Message {
    Head(Vec<(Value, Value)>),
    Item(Option<ReprDigest>, Option<PlainRules>, Value),
    End(Result<Value, Failure>),
}

/// An item's rules, each where plainly valid.
type PlainRules = Vec<Option<PlainRule>>;

/// What `isolane.policy.reuse.source_key` makes of a mapping: a 15-byte BLAKE2b of its `repr`.
type ReprDigest = [u8; 15];

/// [`ReprDigest`] of a mapping whose `repr` the core can tell (taken on the reader's thread).
fn repr_digest(item: &Value) -> Option<ReprDigest> {
    let text = matches!(item, Value::Map(_)).then(|| python_repr(item)).flatten()?;
    let mut hasher = Blake2bVar::new(15).expect("BLAKE2b gives 15 bytes");
    hasher.update(text.as_bytes());
    let mut digest = [0; 15];
    hasher.finalize_variable(&mut digest).expect("the buffer is the digest's size");
    Some(digest)
}

/// Why a streamed read stopped short of a document.
#[derive(Clone)]
enum Failure {
    Yaml(YamlError),
    Panic(String),
}

impl Failure {
    fn to_py_err(&self) -> PyErr {
        match self {
            Failure::Yaml(err) => CoreError::from(err.clone()).into(),
            Failure::Panic(what) => internal_error(what),
        }
    }
}

/// A YAML document being read on another thread, and the items of its streamed sequence, a
/// sequence of Python objects made as they are read (a new object each read), each waiting as
/// needed for the reader to get there. Past the last item: `IndexError`, or the document's
/// error if the reader stopped at one.
#[pyclass(frozen, sequence, module = "isolane._core")]
pub struct YamlStream {
    key: String,
    inflow: Mutex<Inflow>,
    /// The reader's thread waits for it to go, to hand back its heap ([`memory::release_thread_heap`]).
    _reader_waits: std::sync::mpsc::Sender<()>,
}

/// What the reader has handed over so far.
struct Inflow {
    /// `None` once the reader has ended.
    arriving: Option<Receiver<Message>>,
    head: Option<Vec<(Value, Value)>>,
    items: Vec<Value>,
    /// Each item's [`ReprDigest`], where the reader could take it.
    digests: Vec<Option<ReprDigest>>,
    /// Each item's [`PlainRules`], where the reader read them.
    plain_rules: Vec<Option<PlainRules>>,
    end: Option<Result<Value, Failure>>,
    strings: RecentStrings,
    shared: SharedTuples,
}

impl Inflow {
    /// Takes what has arrived; with `wait`, waits for one message first if there is none.
    fn take_arrived(&mut self, wait: bool) {
        let Some(arriving) = &self.arriving else { return };
        let mut message = if wait { arriving.recv().map_err(|_| TryRecvError::Disconnected) } else { arriving.try_recv() };
        loop {
            match message {
                Ok(Message::Head(entries)) => self.head = Some(entries),
                Ok(Message::Item(digest, plain, item)) => {
                    self.items.push(item);
                    self.digests.push(digest);
                    self.plain_rules.push(plain);
                }
                Ok(Message::End(end)) => return self.ended(end),
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => return self.ended(Err(Failure::Panic("the YAML reader stopped".into()))),
            }
            message = arriving.try_recv();
        }
    }

    fn ended(&mut self, end: Result<Value, Failure>) {
        self.end = Some(end);
        self.arriving = None;
    }

    fn failure(&self) -> Option<PyErr> {
        match &self.end {
            Some(Err(failure)) => Some(failure.to_py_err()),
            _ => None,
        }
    }
}

impl YamlStream {
    /// The inflow once `ready` holds of it or the reader has ended, waiting without the GIL.
    fn wait(&self, py: Python<'_>, ready: impl Fn(&Inflow) -> bool) -> MutexGuard<'_, Inflow> {
        loop {
            let mut inflow = self.lock();
            inflow.take_arrived(false);
            if ready(&inflow) || inflow.end.is_some() {
                return inflow;
            }
            drop(inflow);
            py.detach(|| self.lock().take_arrived(true));
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inflow> {
        self.inflow.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[pymethods]
impl YamlStream {
    /// The root mapping's entries before the streamed sequence, once it begins; `None` for a
    /// document without one to stream (`document()` then holds it all).
    fn head<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let mut inflow = self.wait(py, |inflow| inflow.head.is_some());
        let Inflow { head, strings, .. } = &mut *inflow;
        match head {
            Some(entries) => Ok(Some(to_python_map(py, entries, strings, None)?)),
            None => inflow.failure().map_or(Ok(None), Err),
        }
    }

    /// The whole document, once read, with this stream in place of the streamed sequence.
    fn document<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let stream = slf.get();
        let mut inflow = stream.wait(py, |_| false);
        let Inflow { head, end, strings, .. } = &mut *inflow;
        match end {
            Some(Ok(Value::Map(entries))) if head.is_some() => Ok(to_python_map(py, entries, strings, Some((&stream.key, slf.as_any())))?.into_any()),
            Some(Ok(document)) => to_python(py, document, strings),
            Some(Err(failure)) => Err(failure.to_py_err()),
            None => unreachable!("waited for the end"),
        }
    }

    /// How many items there are, counting up to `most` (waiting only for that many).
    fn available(&self, py: Python<'_>, most: usize) -> PyResult<usize> {
        let inflow = self.wait(py, |inflow| inflow.items.len() >= most);
        match inflow.failure() {
            Some(err) if inflow.items.len() < most => Err(err),
            _ => Ok(inflow.items.len().min(most)),
        }
    }

    /// What `isolane.policy.reuse.source_key` gives item `index` (waiting for it), if the
    /// reader could tell: `None` for an item that is not a mapping, or whose `repr` Python
    /// spells by rules of its own (`source_key` then takes it).
    fn repr_digest<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let inflow = self.wait(py, |inflow| index < inflow.items.len());
        match inflow.digests.get(index) {
            Some(digest) => Ok(digest.as_ref().map(|digest| PyBytes::new(py, digest))),
            None => Err(inflow.failure().unwrap_or_else(|| PyIndexError::new_err("index out of range"))),
        }
    }

    /// The rules of item `index` (waiting for it) that the reader found plainly valid, made
    /// `isolane.policy.model.Rule`s (through `slots`, the member descriptors of its fields) in a
    /// tenant of the classes `class_names` (`None`: not known) whose default class is
    /// `default_class`; `None` in their list where Python must read the rule (it names a class
    /// the tenant lacks, or it was not plain), and how many such rules there are; and, where
    /// every rule was made and there are two or more, the tenant's table rows packed as
    /// `isolane.policy.compile` packs them. `None` for an item without a list of rules, or a
    /// stream started without `rules`.
    fn plain_rules<'py>(
        &self,
        py: Python<'py>,
        index: usize,
        class_names: Option<Vec<String>>,
        default_class: Option<Bound<'py, PyString>>,
        slots: RuleSlots<'py>,
    ) -> PyResult<Option<MadeRules<'py>>> {
        let mut inflow = self.wait(py, |inflow| index < inflow.items.len());
        let Inflow { plain_rules, strings, shared, .. } = &mut *inflow;
        let classes = TenantClasses { names: class_names, default: default_class };
        match plain_rules.get(index) {
            Some(Some(rules)) => make_rules(py, rules, &classes, &slots, strings, shared).map(Some),
            Some(None) => Ok(None),
            None => Err(inflow.failure().unwrap_or_else(|| PyIndexError::new_err("index out of range"))),
        }
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let inflow = self.wait(py, |_| false);
        inflow.failure().map_or(Ok(inflow.items.len()), Err)
    }

    fn __getitem__<'py>(&self, py: Python<'py>, index: isize) -> PyResult<Bound<'py, PyAny>> {
        let at = match usize::try_from(index) {
            Ok(at) => Some(at),
            Err(_) => index.checked_add(self.__len__(py)? as isize).and_then(|at| usize::try_from(at).ok()),
        };
        let mut inflow = self.wait(py, |inflow| at.is_some_and(|at| at < inflow.items.len()));
        let Inflow { items, strings, .. } = &mut *inflow;
        match at.and_then(|at| items.get(at)) {
            Some(item) => to_python(py, item, strings),
            None => Err(inflow.failure().unwrap_or_else(|| PyIndexError::new_err("index out of range"))),
        }
    }
}

impl Drop for YamlStream {
    fn drop(&mut self) {
        let inflow = self.inflow.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        drop(std::mem::take(&mut inflow.items));
        drop(std::mem::take(&mut inflow.digests));
        drop(std::mem::take(&mut inflow.plain_rules));
        inflow.end = None;
        memory::release_free_heap();
    }
}

/// A mapping's entries as a dict, the value of `replaced.0` (a string key) being `replaced.1`.
fn to_python_map<'py>(
    py: Python<'py>,
    entries: &[(Value, Value)],
    strings: &mut RecentStrings,
    replaced: Option<(&str, &Bound<'py, PyAny>)>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, value) in entries {
        let value = match (key, replaced) {
            (Value::Str(k), Some((streamed, stream))) if k == streamed => stream.clone(),
            _ => to_python(py, value, strings)?,
        };
        dict.set_item(to_python(py, key, strings)?, value)?;
    }
    Ok(dict)
}

/// The longest string [`RecentStrings`] keeps.
const SHARED_STRING_MAX: usize = 32;

/// Python strings made from a document's short strings, kept in a small table by their hash:
/// what recurs (keys, units, actions, kinds) is one object however often it is written, while
/// what does not (names, prefixes) is not kept. (Interning them instead grew Python's table of
/// interned strings by two entries a tenant, about 190 bytes, for as long as the process runs.)
/// A string found again is marked, and a marked string is not replaced by the next one that
/// falls on its place, only unmarked: unique strings pass by the recurring ones.
pub(super) struct RecentStrings {
    slots: Box<[(Option<Py<PyString>>, bool)]>,
}

impl RecentStrings {
    const SLOTS: usize = 512;

    fn new() -> Self {
        RecentStrings { slots: (0..Self::SLOTS).map(|_| (None, false)).collect() }
    }

    pub(super) fn get<'py>(&mut self, py: Python<'py>, text: &str) -> Bound<'py, PyString> {
        let (held, found_again) = &mut self.slots[slot_of(text, Self::SLOTS)];
        if let Some(held) = held.as_ref().map(|held| held.bind(py)) {
            if held.to_str().is_ok_and(|held| held == text) {
                *found_again = true;
                return held.clone();
            }
        }
        let made = PyString::new(py, text);
        if std::mem::take(found_again) {
            return made; // the string held recurs: it stays, for now
        }
        *held = Some(made.clone().unbind());
        made
    }
}

/// FNV-1a of `text`, in `0..slots` (a power of two).
fn slot_of(text: &str, slots: usize) -> usize {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3));
    hash as usize & (slots - 1)
}

/// Depth is bounded by `yaml::MAX_DEPTH`, so the recursion is too.
fn to_python<'py>(py: Python<'py>, value: &Value, strings: &mut RecentStrings) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        // Most integers fit 64 bits, which convert faster than 128.
        Value::Int(i) => match i64::try_from(*i) {
            Ok(small) => small.into_pyobject(py)?.into_any(),
            Err(_) => i.into_pyobject(py)?.into_any(),
        },
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        Value::Str(s) if s.len() <= SHARED_STRING_MAX => strings.get(py, s).into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::Seq(items) => PyList::new(py, items.iter().map(|item| to_python(py, item, strings)).collect::<PyResult<Vec<_>>>()?)?.into_any(),
        Value::Map(entries) => {
            let dict = PyDict::new(py);
            for (key, value) in entries {
                dict.set_item(to_python(py, key, strings)?, to_python(py, value, strings)?)?;
            }
            dict.into_any()
        }
    })
}
