//! The config cache of one instance (`--config-ttl`, default 60 s like the
//! reference limiter's; `0` turns it off): the namespace id and the resolved
//! level of each (entity, resource) are kept that long, so a warm decision
//! reads only the state item. The state is never cached. A limit changed by
//! `limits apply` is enforced by every instance at most one TTL later.
//! Failures are not cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::metrics::Metrics;
use crate::runtime::{self, Namespace, ResolvedLevel, RuntimeError};
use crate::store::Store;

/// Resolved levels kept at most; past it, expired ones go, then all.
const MAX_LEVELS: usize = 100_000;

type Levels = HashMap<(String, String), (Arc<ResolvedLevel>, Instant)>;

pub struct ConfigCache {
    ttl: Duration,
    namespace: String,
    ns: Mutex<Option<(Namespace, Instant)>>,
    levels: Mutex<Levels>,
    metrics: Arc<Metrics>,
}

impl ConfigCache {
    pub fn new(ttl: Duration, namespace: &str, metrics: Arc<Metrics>) -> ConfigCache {
        ConfigCache {
            ttl,
            namespace: namespace.to_string(),
            ns: Mutex::new(None),
            levels: Mutex::new(HashMap::new()),
            metrics,
        }
    }

    /// Whether anything is kept (`--config-ttl` above 0).
    pub fn enabled(&self) -> bool {
        !self.ttl.is_zero()
    }

    fn fresh(&self, at: Instant) -> bool {
        at.elapsed() < self.ttl
    }

    /// The served namespace (its registration read at most once per TTL).
    pub fn namespace(&self, store: &dyn Store) -> Result<Namespace, RuntimeError> {
        if let Some((ns, at)) = self.ns.lock().ok().and_then(|g| g.clone()) {
            if self.fresh(at) {
                self.metrics.cache(true);
                return Ok(ns);
            }
        }
        self.metrics.cache(false);
        let ns = runtime::namespace_id(store, &self.namespace)?;
        if self.enabled() {
            if let Ok(mut g) = self.ns.lock() {
                *g = Some((ns.clone(), Instant::now()));
            }
        }
        Ok(ns)
    }

    /// The level of (entity, resource), resolved at most once per TTL.
    pub fn level(
        &self,
        store: &dyn Store,
        ns: &Namespace,
        entity: &str,
        resource: &str,
    ) -> Result<Arc<ResolvedLevel>, RuntimeError> {
        let key = (entity.to_string(), resource.to_string());
        let cached = self.levels.lock().ok().and_then(|m| m.get(&key).cloned());
        if let Some((level, at)) = cached {
            if self.fresh(at) {
                self.metrics.cache(true);
                return Ok(level);
            }
        }
        self.metrics.cache(false);
        let level = Arc::new(runtime::resolve(store, ns, entity, resource)?);
        if self.enabled() {
            if let Ok(mut m) = self.levels.lock() {
                if m.len() >= MAX_LEVELS {
                    m.retain(|_, (_, at)| at.elapsed() < self.ttl);
                    if m.len() >= MAX_LEVELS {
                        m.clear();
                    }
                }
                m.insert(key, (level.clone(), Instant::now()));
            }
        }
        Ok(level)
    }
}
