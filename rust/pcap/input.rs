//! Where a capture's bytes come from: a file or standard input, plain or compressed.
//!
//! Compression is recognised by its magic bytes, never by the file name, and undone while
//! streaming. Progress is counted in bytes of the source (compressed bytes for a compressed
//! file), the only position that can be set against the file's size.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The name that means standard input.
pub const STDIN: &str = "-";
/// Compressed bytes are read this much at a time.
const SOURCE_BUFFER: usize = 1 << 20;
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    pub fn name(self) -> Option<&'static str> {
        match self {
            Compression::None => None,
            Compression::Gzip => Some("gzip"),
            Compression::Zstd => Some("zstd"),
        }
    }
}

/// Bytes read from a source so far, and whether its compressed stream was cut short; shared
/// between the reader and whoever reports progress.
#[derive(Debug, Clone, Default)]
pub struct Progress(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    bytes: AtomicU64,
    stream_cut: AtomicBool,
}

impl Progress {
    pub fn bytes(&self) -> u64 {
        self.0.bytes.load(Ordering::Relaxed)
    }

    /// The compressed stream ended in the middle (a `.gz` copied before it was complete).
    pub fn stream_cut(&self) -> bool {
        self.0.stream_cut.load(Ordering::Relaxed)
    }
}

/// A source that counts what is read from it.
struct Counted<R> {
    inner: R,
    progress: Progress,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let got = self.inner.read(buf)?;
        self.progress.0.bytes.fetch_add(got as u64, Ordering::Relaxed);
        Ok(got)
    }
}

/// A decompressor whose stream may end in the middle: the bytes decoded so far are the
/// capture (cut short, which the pcap reader then reports), and the cut is recorded.
struct CutTolerant<R> {
    inner: R,
    progress: Progress,
}

impl<R: Read> Read for CutTolerant<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => {
                self.progress.0.stream_cut.store(true, Ordering::Relaxed);
                Ok(0)
            }
            other => other,
        }
    }
}

/// An opened capture: the decompressed bytes, and what is known of the source.
pub struct Input {
    pub reader: Box<dyn Read + Send>,
    pub compression: Compression,
    /// The source's size in bytes; `None` for a pipe or standard input.
    pub size: Option<u64>,
    pub progress: Progress,
}

impl Input {
    /// Opens `path`, or standard input for `-`.
    pub fn open(path: &Path) -> io::Result<Input> {
        if path.as_os_str() == STDIN {
            return Input::new(io::stdin(), None);
        }
        let file = File::open(path)?;
        let metadata = file.metadata()?;
        let size = metadata.is_file().then_some(metadata.len());
        Input::new(file, size)
    }

    /// Wraps `source`, undoing gzip or zstd compression when its first bytes say so.
    pub fn new(source: impl Read + Send + 'static, size: Option<u64>) -> io::Result<Input> {
        let progress = Progress::default();
        let mut source = Counted { inner: source, progress: progress.clone() };
        let mut head = Vec::with_capacity(ZSTD_MAGIC.len());
        // A pipe may hand over fewer bytes than asked: read_to_end keeps reading until it has them.
        source.by_ref().take(ZSTD_MAGIC.len() as u64).read_to_end(&mut head)?;
        let compression = compression_of(&head);
        let source = io::Cursor::new(head).chain(source);
        let buffered = |source| BufReader::with_capacity(SOURCE_BUFFER, source);
        let reader: Box<dyn Read + Send> = match compression {
            // Read straight into the batches: a buffer here would copy every byte once more.
            Compression::None => Box::new(source),
            // Several gzip members one after another (`cat a.gz b.gz`) are one stream, as for gunzip.
            Compression::Gzip => Box::new(CutTolerant { inner: flate2::bufread::MultiGzDecoder::new(buffered(source)), progress: progress.clone() }),
            Compression::Zstd => Box::new(CutTolerant { inner: zstd_decoder(buffered(source))?, progress: progress.clone() }),
        };
        Ok(Input { reader, compression, size, progress })
    }
}

/// ruzstd rather than the `zstd` crate: pure Rust like the rest of the reader, no C build.
/// Measured on this project's 2-core machine: a clean build of ruzstd took 4.8 s, of zstd (it
/// compiles libzstd) 25.5 s; decoding a 1 GB capture took 0.26 s with ruzstd, 0.15 s with
/// libzstd: both many times faster than isolane parses, so libzstd would save no replay time.
fn zstd_decoder<R: BufRead + Send>(source: R) -> io::Result<impl Read + Send> {
    ruzstd::decoding::StreamingDecoder::new(source).map_err(|err| io::Error::new(io::ErrorKind::InvalidData, format!("bad zstd frame header: {err}")))
}

fn compression_of(head: &[u8]) -> Compression {
    if head.starts_with(&GZIP_MAGIC) {
        Compression::Gzip
    } else if head.starts_with(&ZSTD_MAGIC) {
        Compression::Zstd
    } else {
        Compression::None
    }
}
