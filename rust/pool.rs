//! Worker threads for the data path: one rayon pool per thread count, built once and shared by
//! the parser and the engine (building a pool per call costs more than a small batch).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The pool of `threads` threads (`None` if the system refuses to start them: run inline).
pub(crate) fn thread_pool(threads: usize) -> Option<Arc<rayon::ThreadPool>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS.get_or_init(Default::default).lock().ok()?;
    if let Some(pool) = pools.get(&threads) {
        return Some(pool.clone());
    }
    let pool = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(threads).build().ok()?);
    pools.insert(threads, pool.clone());
    Some(pool)
}
