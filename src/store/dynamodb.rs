//! The DynamoDB store (aws-sdk-dynamodb) behind the synchronous [`Store`] seam.
//!
//! The store owns a current-thread tokio runtime and blocks on it inside each
//! method, so commands that never open a store never start a runtime or build
//! an AWS client. Configuration follows the standard AWS chain (profiles,
//! `AWS_REGION`, `AWS_ENDPOINT_URL`), overridden by `--region`/`--endpoint-url`.
//!
//! Throttling and transient failures (5xx, dropped connections, timeouts) are
//! retried by the SDK's standard retry mode with jittered exponential backoff;
//! on top of that, unprocessed BatchGetItem keys and transaction conflicts are
//! retried here. Every other failure becomes a one-line [`StoreError`].

mod batch_write;
mod convert;
mod errors;
mod expr;
pub mod schema;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::types::{
    AttributeValue as Av, ConditionCheck, Delete, KeysAndAttributes, Put, ReturnValue,
    TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;

use self::convert::{item_from_wire, item_to_wire, key_from_wire, key_to_wire, to_av};
use self::errors::{classify, Failure};
use self::expr::Placeholders;
use super::backoff::backoff;
use super::{Index, Item, Key, Missing, Store, StoreError, WriteOp};

/// Keys per BatchGetItem request (DynamoDB's limit).
const BATCH_GET_MAX: usize = 100;
/// How many requests [`DynamoStore::write_many`] and batch reads keep in flight.
const CONCURRENCY: usize = 16;
/// Rounds for unprocessed keys and transaction conflicts before giving up.
const MAX_ROUNDS: u32 = 10;
/// When set, the number of HTTP requests sent is printed on stderr when the
/// store is dropped (used by the benchmarks).
pub use super::REQUEST_STATS_ENV;

/// Connects to `table` through the standard AWS configuration chain.
pub fn connect(
    table: &str,
    region: Option<&str>,
    endpoint_url: Option<&str>,
) -> Result<Box<dyn Store>, StoreError> {
    Ok(Box::new(DynamoStore::connect(table, region, endpoint_url)?))
}

/// A DynamoDB table as a [`Store`].
pub struct DynamoStore {
    table: String,
    region: String,
    endpoint: String,
    rt: tokio::runtime::Runtime,
    client: Client,
    sdk_config: aws_config::SdkConfig,
    requests: Arc<AtomicU64>,
    /// Calls and time per store operation, for [`REQUEST_STATS_ENV`].
    timings: std::sync::Mutex<BTreeMap<&'static str, (u64, Duration)>>,
}

/// `--endpoint-url` (or `AWS_ENDPOINT_URL`) must be an http(s) URL with a
/// host: checked before the SDK, which reports a bad one per request with its
/// whole internal request attached.
fn check_endpoint(url: &str) -> Result<(), StoreError> {
    let bad = |why: &'static str| StoreError::InvalidEndpoint {
        url: url.to_string(),
        why,
    };
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| bad("it must start with http:// or https://"))?;
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("it contains whitespace"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // A bracketed IPv6 host may hold colons; the port follows the bracket.
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, _)) if h.starts_with('[') && !h.ends_with(']') => (authority, None),
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    if host.is_empty() || host == "[]" {
        return Err(bad("it names no host"));
    }
    if let Some(p) = port {
        if p.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(bad("the port must be a number from 1 to 65535"));
        }
    }
    Ok(())
}

/// What CloudFormation says about the stack of the same name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackInfo {
    pub status: String,
    /// Output key → value, sorted by key.
    pub outputs: BTreeMap<String, String>,
}

/// Counts every HTTP attempt (retries included) for request budgets.
#[derive(Debug)]
struct CountRequests(Arc<AtomicU64>);

impl Intercept for CountRequests {
    fn name(&self) -> &'static str {
        "CountRequests"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Sends one single-item write, with the placeholders' names and values and
/// asking for the old image, in [`DynamoStore::write_request`]: `$request` is
/// the operation's builder with its item or key, update and condition set;
/// `$failure` wraps the operation's SDK error. The three operations are
/// different SDK types with the same methods, hence a macro.
macro_rules! send_write {
    ($request:ident, $p:ident, $key:ident, $action:literal, $failure:path) => {{
        let vals = match wire_values(&$p) {
            Ok(v) => v,
            Err(e) => return (Err(WriteFailure::Local(e)), $key, $action),
        };
        let out = $request
            .set_expression_attribute_names($p.names_map())
            .set_expression_attribute_values(vals)
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| $failure(Box::new(e)))
            .and_then(|o| old_image(o.attributes.as_ref()));
        (out, $key, $action)
    }};
}

impl DynamoStore {
    /// Loads the AWS configuration and builds the client. Sends no request.
    pub fn connect(
        table: &str,
        region: Option<&str>,
        endpoint_url: Option<&str>,
    ) -> Result<Self, StoreError> {
        let endpoint_url = endpoint_url.filter(|u| !u.is_empty());
        if let Some(u) = endpoint_url {
            check_endpoint(u)?;
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Backend(format!("cannot start the async runtime: {e}")))?;
        let retry = aws_config::retry::RetryConfig::standard()
            .with_max_attempts(8)
            .with_initial_backoff(Duration::from_millis(50))
            .with_max_backoff(Duration::from_secs(5));
        let timeouts = aws_config::timeout::TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(5))
            .operation_attempt_timeout(Duration::from_secs(30))
            .build();
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .retry_config(retry)
            .timeout_config(timeouts);
        if let Some(r) = region.filter(|r| !r.is_empty()) {
            loader = loader.region(aws_config::Region::new(r.to_string()));
        }
        if let Some(u) = endpoint_url {
            loader = loader.endpoint_url(u);
        }
        let sdk_config = rt.block_on(loader.load());
        let Some(region) = sdk_config.region().map(|r| r.to_string()) else {
            let local = if endpoint_url.is_some() {
                format!("; {}", errors::LOCAL_SERVER_HINT)
            } else {
                String::new()
            };
            return Err(StoreError::Backend(format!(
                "no AWS region configured: pass --region REGION or set AWS_REGION (or a region in your AWS profile){local}"
            )));
        };
        let requests = Arc::new(AtomicU64::new(0));
        let conf = aws_sdk_dynamodb::config::Builder::from(&sdk_config)
            .interceptor(CountRequests(requests.clone()))
            .build();
        Ok(DynamoStore {
            table: table.to_string(),
            region,
            endpoint: sdk_config.endpoint_url().unwrap_or_default().to_string(),
            client: Client::from_conf(conf),
            rt,
            sdk_config,
            requests,
            timings: Default::default(),
        })
    }

    /// Runs `f`, recording its duration under `op` for the request
    /// statistics; the one way in of every [`Store`] call, outside the SDK's
    /// runtime, so its errors are completed here ([`Settled`]).
    fn timed<T: Settled>(&self, op: &'static str, f: impl FnOnce() -> T) -> T {
        let started = std::time::Instant::now();
        let out = f().settled(self);
        if let Ok(mut t) = self.timings.lock() {
            let e = t.entry(op).or_default();
            e.0 += 1;
            e.1 += started.elapsed();
        }
        out
    }

    /// HTTP requests sent so far (retries included).
    pub fn request_count(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// Turns an SDK error into a [`StoreError`]; `key` names the item for conditions.
    pub(crate) fn explain<E, R>(
        &self,
        err: aws_sdk_dynamodb::error::SdkError<E, R>,
        action: &str,
        key: Option<&Key>,
    ) -> StoreError
    where
        E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug + 'static,
    {
        match classify(err, action, &self.table, &self.endpoint) {
            Failure::NotFound => self.table_not_found(),
            Failure::ConditionFailed => {
                let key = key.cloned().unwrap_or_else(|| Key::new("?", "?"));
                StoreError::ConditionFailed {
                    pk: key.pk,
                    sk: key.sk,
                }
            }
            Failure::Cancelled(codes) => StoreError::TransactionCanceled(codes.join(", ")),
            Failure::TooLarge => {
                let key = key.cloned().unwrap_or_else(|| Key::new("?", "?"));
                StoreError::ItemTooLarge {
                    pk: key.pk,
                    sk: key.sk,
                    bytes: None,
                }
            }
            Failure::Other(e) => e,
        }
    }

    /// The missing-table error, without the stack's status: it is met
    /// inside the SDK's runtime too (one of many concurrent requests), where
    /// asking CloudFormation would block the runtime on itself, a panic.
    /// [`DynamoStore::timed`] adds the status ([`DynamoStore::with_stack`]).
    pub fn table_not_found(&self) -> StoreError {
        StoreError::TableNotFound {
            table: self.table.clone(),
            where_: Missing::DynamoDb {
                region: self.region.clone(),
                endpoint_url: (!self.endpoint.is_empty()).then(|| self.endpoint.clone()),
                stack: None,
            },
        }
    }

    /// An error completed outside the runtime: a missing table gets the
    /// status of a CloudFormation stack of its name, if there is one.
    fn with_stack(&self, e: StoreError) -> StoreError {
        match e {
            StoreError::TableNotFound {
                table,
                where_:
                    Missing::DynamoDb {
                        region,
                        endpoint_url,
                        stack: None,
                    },
            } => StoreError::TableNotFound {
                table,
                where_: Missing::DynamoDb {
                    region,
                    endpoint_url,
                    stack: self.stack_info().ok().flatten().map(|s| s.status),
                },
            },
            e => e,
        }
    }

    /// The CloudFormation stack named like the table: `None` when there is no
    /// such stack (tables made by `table create` have none).
    pub fn stack_info(&self) -> Result<Option<StackInfo>, StoreError> {
        let cfn = aws_sdk_cloudformation::Client::new(&self.sdk_config);
        let res = self.block_on(cfn.describe_stacks().stack_name(&self.table).send());
        self.requests.fetch_add(1, Ordering::Relaxed);
        match res {
            Ok(out) => Ok(out.stacks().first().map(|s| StackInfo {
                status: s
                    .stack_status()
                    .map(|st| st.as_str().to_string())
                    .unwrap_or_else(|| "UNKNOWN".into()),
                outputs: s
                    .outputs()
                    .iter()
                    .filter_map(|o| {
                        Some((o.output_key()?.to_string(), o.output_value()?.to_string()))
                    })
                    .collect(),
            })),
            Err(e) => {
                use aws_sdk_cloudformation::error::ProvideErrorMetadata as _;
                let missing = e.code() == Some("ValidationError")
                    && e.message().is_some_and(|m| m.contains("does not exist"));
                if missing {
                    Ok(None)
                } else {
                    Err(StoreError::Backend(format!(
                        "cannot read CloudFormation stack '{}': {}",
                        self.table,
                        e.message()
                            .map(str::to_string)
                            .unwrap_or_else(|| errors::one_line(&e))
                    )))
                }
            }
        }
    }

    /// Runs many independent writes, at most [`CONCURRENCY`] at a time. One
    /// result per op, in the same order; a failure does not stop the others.
    pub fn write_many_concurrent(
        &self,
        ops: Vec<WriteOp>,
    ) -> Vec<Result<Option<Item>, StoreError>> {
        let mut results: Vec<Option<Result<Option<Item>, StoreError>>> =
            (0..ops.len()).map(|_| None).collect();
        let mut pending = ops.into_iter().enumerate();
        self.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            loop {
                while set.len() < CONCURRENCY {
                    let Some((i, op)) = pending.next() else { break };
                    let req = self.write_request(op);
                    set.spawn(async move { (i, req.await) });
                }
                match set.join_next().await {
                    Some(Ok((i, (res, key, action)))) => {
                        results[i] = Some(res.map_err(|e| e.explain_with(self, action, &key)));
                    }
                    Some(Err(join)) => {
                        // A panicked task: report it against the first unfilled slot.
                        if let Some(slot) = results.iter_mut().find(|r| r.is_none()) {
                            *slot = Some(Err(StoreError::Backend(format!(
                                "write task failed: {join}"
                            ))));
                        }
                    }
                    None => break,
                }
            }
        });
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(StoreError::Backend("write was not run".into()))))
            .collect()
    }

    /// Builds the request future for one write; it owns everything it needs, so
    /// many can run at once on the runtime.
    fn write_request(
        &self,
        op: WriteOp,
    ) -> impl std::future::Future<Output = (Result<Option<Item>, WriteFailure>, Key, &'static str)>
           + Send
           + 'static {
        let client = self.client.clone();
        let table = self.table.clone();
        async move {
            let key = op.key();
            match op {
                WriteOp::Put { item, condition } => {
                    let wire = match item_to_wire(&item) {
                        Ok(w) => w,
                        Err(e) => return (Err(WriteFailure::Local(e)), key, "PutItem"),
                    };
                    let mut p = Placeholders::new();
                    let cond = condition.as_ref().map(|c| p.condition(c));
                    let request = client
                        .put_item()
                        .table_name(table)
                        .set_item(Some(wire))
                        .set_condition_expression(cond);
                    send_write!(request, p, key, "PutItem", WriteFailure::Put)
                }
                WriteOp::Delete { key: k, condition } => {
                    let mut p = Placeholders::new();
                    let cond = condition.as_ref().map(|c| p.condition(c));
                    let request = client
                        .delete_item()
                        .table_name(table)
                        .set_key(Some(key_to_wire(&k)))
                        .set_condition_expression(cond);
                    send_write!(request, p, key, "DeleteItem", WriteFailure::Delete)
                }
                WriteOp::Update {
                    key: k,
                    actions,
                    condition,
                } => {
                    let mut p = Placeholders::new();
                    let update = p.update(&actions);
                    let cond = condition.as_ref().map(|c| p.condition(c));
                    let request = client
                        .update_item()
                        .table_name(table)
                        .set_key(Some(key_to_wire(&k)))
                        .set_update_expression(update)
                        .set_condition_expression(cond);
                    send_write!(request, p, key, "UpdateItem", WriteFailure::Update)
                }
            }
        }
    }

    async fn batch_get_chunk(
        client: Client,
        table: String,
        keys: Vec<Key>,
        consistent: bool,
    ) -> Result<Vec<HashMap<String, Av>>, ChunkError> {
        let mut found = vec![];
        let mut todo: Vec<HashMap<String, Av>> = keys.iter().map(key_to_wire).collect();
        let mut rounds = Rounds::default();
        while !todo.is_empty() {
            if !rounds.next().await {
                return Err(ChunkError::Exhausted(todo.len()));
            }
            let ka = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut todo)))
                .consistent_read(consistent)
                .build()
                .map_err(|e| ChunkError::Build(e.to_string()))?;
            let out = client
                .batch_get_item()
                .request_items(&table, ka)
                .send()
                .await
                .map_err(|e| ChunkError::Sdk(Box::new(e)))?;
            if let Some(mut resp) = out.responses {
                found.extend(resp.remove(&table).unwrap_or_default());
            }
            if let Some(left) = out.unprocessed_keys.and_then(|mut un| un.remove(&table)) {
                todo = left.keys;
            }
        }
        Ok(found)
    }
}

type HttpResponse = aws_sdk_dynamodb::config::http::HttpResponse;
type SdkError<E> = aws_sdk_dynamodb::error::SdkError<E, HttpResponse>;

/// Why one BatchGetItem chunk failed.
enum ChunkError {
    Sdk(Box<SdkError<aws_sdk_dynamodb::operation::batch_get_item::BatchGetItemError>>),
    Exhausted(usize),
    Build(String),
}

impl Drop for DynamoStore {
    fn drop(&mut self) {
        if std::env::var_os(REQUEST_STATS_ENV).is_some() {
            eprintln!("zae-limiter: {} DynamoDB requests", self.request_count());
            if let Ok(t) = self.timings.lock() {
                for (op, (n, d)) in t.iter() {
                    eprintln!("zae-limiter:   {op}: {n} calls, {:.3} s", d.as_secs_f64());
                }
            }
        }
    }
}

/// A write that failed, before the store adds the table and key context.
enum WriteFailure {
    Local(StoreError),
    Put(Box<SdkError<aws_sdk_dynamodb::operation::put_item::PutItemError>>),
    Delete(Box<SdkError<aws_sdk_dynamodb::operation::delete_item::DeleteItemError>>),
    Update(Box<SdkError<aws_sdk_dynamodb::operation::update_item::UpdateItemError>>),
}

impl WriteFailure {
    fn explain_with(self, store: &DynamoStore, action: &str, key: &Key) -> StoreError {
        match self {
            WriteFailure::Local(e) => e,
            WriteFailure::Put(e) => store.explain(*e, action, Some(key)),
            WriteFailure::Delete(e) => store.explain(*e, action, Some(key)),
            WriteFailure::Update(e) => store.explain(*e, action, Some(key)),
        }
    }
}

fn old_image(raw: Option<&HashMap<String, Av>>) -> Result<Option<Item>, WriteFailure> {
    match raw {
        Some(m) if !m.is_empty() => item_from_wire(m).map(Some).map_err(WriteFailure::Local),
        _ => Ok(None),
    }
}

/// `ExpressionAttributeValues` for the wire, or `None` when there are none.
fn wire_values(p: &Placeholders) -> Result<Option<HashMap<String, Av>>, StoreError> {
    if !p.has_values() {
        return Ok(None);
    }
    p.values()
        .map(|(ph, v)| Ok((ph, to_av(v)?)))
        .collect::<Result<HashMap<_, _>, StoreError>>()
        .map(Some)
}

/// The rounds of a batch call and the retries of its unprocessed part: the first
/// goes at once, each later one after [`backoff`], at most [`MAX_ROUNDS`].
#[derive(Default)]
struct Rounds(u32);

impl Rounds {
    /// Waits for the next round; `false` once they are used up.
    async fn next(&mut self) -> bool {
        if self.0 >= MAX_ROUNDS {
            return false;
        }
        if self.0 > 0 {
            tokio::time::sleep(backoff(self.0)).await;
        }
        self.0 += 1;
        true
    }
}

impl Store for DynamoStore {
    fn table_name(&self) -> &str {
        &self.table
    }
    fn target(&self) -> Option<super::open::Target> {
        Some(super::open::Target::DynamoDb {
            region: Some(self.region.clone()),
            endpoint_url: (!self.endpoint.is_empty()).then(|| self.endpoint.clone()),
        })
    }

    fn get(&self, key: &Key, consistent: bool) -> Result<Option<Item>, StoreError> {
        self.timed("get", || self.get_untimed(key, consistent))
    }

    fn batch_get(&self, keys: &[Key], consistent: bool) -> Result<Vec<Option<Item>>, StoreError> {
        self.timed("batch_get", || self.batch_get_untimed(keys, consistent))
    }

    fn query(&self, pk: &str, sk_prefix: &str, consistent: bool) -> Result<Vec<Item>, StoreError> {
        self.timed("query", || self.query_untimed(pk, sk_prefix, consistent))
    }

    fn query_index(&self, index: Index, pk: &str, sk_prefix: &str) -> Result<Vec<Key>, StoreError> {
        self.timed("query_index", || {
            self.query_index_untimed(index, pk, sk_prefix)
        })
    }

    fn index_lags(&self) -> bool {
        true
    }

    fn count_index(&self, index: Index, pk: &str, sk_prefix: &str) -> Result<usize, StoreError> {
        self.timed("count_index", || {
            self.count_index_untimed(index, pk, sk_prefix)
        })
    }

    fn write(&self, op: WriteOp) -> Result<Option<Item>, StoreError> {
        self.timed("write", || self.write_untimed(op))
    }

    fn write_many(&self, ops: Vec<WriteOp>) -> Vec<Result<Option<Item>, StoreError>> {
        self.timed("write_many", || self.write_many_concurrent(ops))
    }

    fn batch_write(&self, ops: Vec<WriteOp>) -> Vec<Result<(), StoreError>> {
        self.timed("batch_write", || self.batch_write_untimed(ops))
    }

    fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        self.timed("transact", || self.transact_untimed(ops))
    }
}

impl DynamoStore {
    fn get_untimed(&self, key: &Key, consistent: bool) -> Result<Option<Item>, StoreError> {
        let res = self.block_on(
            self.client
                .get_item()
                .table_name(&self.table)
                .set_key(Some(key_to_wire(key)))
                .consistent_read(consistent)
                .send(),
        );
        match res {
            Ok(out) => match out.item {
                Some(raw) => item_from_wire(&raw).map(Some),
                None => Ok(None),
            },
            Err(e) => Err(self.explain(e, "GetItem", Some(key))),
        }
    }

    fn batch_get_untimed(
        &self,
        keys: &[Key],
        consistent: bool,
    ) -> Result<Vec<Option<Item>>, StoreError> {
        // DynamoDB rejects duplicate keys in one request: read each key once.
        let mut unique: Vec<Key> = keys.to_vec();
        unique.sort();
        unique.dedup();
        let chunks: Vec<Vec<Key>> = unique.chunks(BATCH_GET_MAX).map(<[Key]>::to_vec).collect();
        let mut found: HashMap<Key, Item> = HashMap::new();
        let outcome: Result<(), StoreError> = self.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            let mut chunks = chunks.into_iter();
            loop {
                while set.len() < CONCURRENCY {
                    let Some(chunk) = chunks.next() else { break };
                    set.spawn(Self::batch_get_chunk(
                        self.client.clone(),
                        self.table.clone(),
                        chunk,
                        consistent,
                    ));
                }
                match set.join_next().await {
                    Some(Ok(Ok(items))) => {
                        for raw in items {
                            let item = item_from_wire(&raw)?;
                            if let Some(k) = key_from_wire(&raw) {
                                found.insert(k, item);
                            }
                        }
                    }
                    Some(Ok(Err(ChunkError::Sdk(e)))) => {
                        return Err(self.explain(*e, "BatchGetItem", None))
                    }
                    Some(Ok(Err(ChunkError::Exhausted(n)))) => {
                        return Err(StoreError::Backend(format!(
                            "BatchGetItem on table '{}' still left {n} keys unprocessed after {MAX_ROUNDS} tries (the table is throttling reads); try again later",
                            self.table
                        )))
                    }
                    Some(Ok(Err(ChunkError::Build(e)))) => {
                        return Err(StoreError::Backend(format!("invalid BatchGetItem request: {e}")))
                    }
                    Some(Err(join)) => {
                        return Err(StoreError::Backend(format!("read task failed: {join}")))
                    }
                    None => return Ok(()),
                }
            }
        });
        outcome?;
        Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
    }

    fn query_untimed(
        &self,
        pk: &str,
        sk_prefix: &str,
        consistent: bool,
    ) -> Result<Vec<Item>, StoreError> {
        let mut out = vec![];
        self.query_pages(None, pk, sk_prefix, Want::Items { consistent }, |page| {
            for raw in page.items.unwrap_or_default() {
                out.push(item_from_wire(&raw)?);
            }
            Ok(())
        })?;
        Ok(out)
    }

    fn count_index_untimed(
        &self,
        index: Index,
        pk: &str,
        sk_prefix: &str,
    ) -> Result<usize, StoreError> {
        let mut total = 0usize;
        self.query_pages(Some(index), pk, sk_prefix, Want::Count, |page| {
            total += usize::try_from(page.count).unwrap_or(0);
            Ok(())
        })?;
        Ok(total)
    }

    fn query_index_untimed(
        &self,
        index: Index,
        pk: &str,
        sk_prefix: &str,
    ) -> Result<Vec<Key>, StoreError> {
        let mut out = vec![];
        self.query_pages(Some(index), pk, sk_prefix, Want::Keys, |page| {
            out.extend(
                page.items
                    .unwrap_or_default()
                    .iter()
                    .filter_map(key_from_wire),
            );
            Ok(())
        })?;
        Ok(out)
    }

    /// A Query of the table (`index` `None`) or an index for the items whose
    /// partition key is `pk` and sort key begins with `sk_prefix`, page by
    /// page until DynamoDB has no more; `want` says what comes back.
    fn query_pages(
        &self,
        index: Option<Index>,
        pk: &str,
        sk_prefix: &str,
        want: Want,
        mut on_page: impl FnMut(
            aws_sdk_dynamodb::operation::query::QueryOutput,
        ) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let (ipk, isk) = index.map_or(("PK", "SK"), Index::key_attrs);
        let mut p = Placeholders::new();
        let cond = key_condition(&mut p, ipk, isk, pk, sk_prefix);
        let projection =
            matches!(want, Want::Keys).then(|| format!("{}, {}", p.name("PK"), p.name("SK")));
        let vals = wire_values(&p)?;
        let mut start: Option<HashMap<String, Av>> = None;
        loop {
            let mut query = self
                .client
                .query()
                .table_name(&self.table)
                .set_index_name(index.map(|i| index_name(i).to_string()))
                .key_condition_expression(&cond)
                .set_projection_expression(projection.clone())
                .set_expression_attribute_names(p.names_map())
                .set_expression_attribute_values(vals.clone())
                .set_exclusive_start_key(start.take());
            query = match want {
                Want::Items { consistent } => query.consistent_read(consistent),
                Want::Count => query.select(aws_sdk_dynamodb::types::Select::Count),
                Want::Keys => query,
            };
            let page = self
                .block_on(query.send())
                .map_err(|e| self.explain(e, "Query", None))?;
            let next = page.last_evaluated_key.clone();
            on_page(page)?;
            match next {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return Ok(()),
            }
        }
    }

    fn write_untimed(&self, op: WriteOp) -> Result<Option<Item>, StoreError> {
        let (res, key, action) = self.block_on(self.write_request(op));
        res.map_err(|e| e.explain_with(self, action, &key))
    }

    fn transact_untimed(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        if ops.is_empty() {
            return Ok(());
        }
        if ops.len() > 100 {
            return Err(StoreError::Backend(format!(
                "a transaction holds at most 100 writes, not {}",
                ops.len()
            )));
        }
        let keys: Vec<Key> = ops.iter().map(WriteOp::key).collect();
        let items = ops
            .iter()
            .map(|op| self.transact_item(op))
            .collect::<Result<Vec<_>, _>>()?;
        let mut round = 0;
        loop {
            let res = self.block_on(
                self.client
                    .transact_write_items()
                    .set_transact_items(Some(items.clone()))
                    .send(),
            );
            let Err(err) = res else { return Ok(()) };
            let reasons: Option<Vec<String>> = err.as_service_error().and_then(|se| match se {
                aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(c) => Some(
                    c.cancellation_reasons()
                        .iter()
                        .map(|r| r.code().unwrap_or("None").to_string())
                        .collect(),
                ),
                _ => None,
            });
            let conflict = reasons
                .as_ref()
                .is_some_and(|rs| rs.iter().any(|r| r == "TransactionConflict"))
                || err.as_service_error().is_some_and(|se| {
                    matches!(se, aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionInProgressException(_))
                });
            round += 1;
            if conflict && round < MAX_ROUNDS {
                self.block_on(tokio::time::sleep(backoff(round)));
                continue;
            }
            return Err(match reasons {
                Some(rs) => StoreError::TransactionCanceled(describe_reasons(&rs, &keys)),
                None => self.explain(err, "TransactWriteItems", None),
            });
        }
    }
}

/// A transaction item's part: `$builder` with the placeholders' names and
/// values, built (each part is its own SDK type with the same methods).
macro_rules! built_with {
    ($builder:ident, $p:ident, $build:ident) => {
        $builder
            .set_expression_attribute_names($p.names_map())
            .set_expression_attribute_values(wire_values(&$p)?)
            .build()
            .map_err($build)?
    };
}

impl DynamoStore {
    fn transact_item(&self, op: &WriteOp) -> Result<TransactWriteItem, StoreError> {
        let build = |e: aws_sdk_dynamodb::error::BuildError| {
            StoreError::Backend(format!("invalid transaction item: {e}"))
        };
        let mut p = Placeholders::new();
        Ok(match op {
            WriteOp::Put { item, condition } => {
                let cond = condition.as_ref().map(|c| p.condition(c));
                let put = Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(item_to_wire(item)?))
                    .set_condition_expression(cond);
                TransactWriteItem::builder()
                    .put(built_with!(put, p, build))
                    .build()
            }
            WriteOp::Delete { key, condition } => {
                let cond = condition.as_ref().map(|c| p.condition(c));
                let delete = Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(key_to_wire(key)))
                    .set_condition_expression(cond);
                TransactWriteItem::builder()
                    .delete(built_with!(delete, p, build))
                    .build()
            }
            WriteOp::Update {
                key,
                actions,
                condition,
            } => {
                let update = p.update(actions);
                let cond = condition.as_ref().map(|c| p.condition(c));
                match update {
                    // A transaction item must change something; a bare condition is a ConditionCheck.
                    None => {
                        let check = ConditionCheck::builder()
                            .table_name(&self.table)
                            .set_key(Some(key_to_wire(key)))
                            .condition_expression(cond.unwrap_or_else(|| {
                                format!(
                                    "attribute_exists({}) OR attribute_not_exists({})",
                                    p.name("PK"),
                                    p.name("PK")
                                )
                            }));
                        TransactWriteItem::builder()
                            .condition_check(built_with!(check, p, build))
                            .build()
                    }
                    Some(update) => {
                        let update = Update::builder()
                            .table_name(&self.table)
                            .set_key(Some(key_to_wire(key)))
                            .update_expression(update)
                            .set_condition_expression(cond);
                        TransactWriteItem::builder()
                            .update(built_with!(update, p, build))
                            .build()
                    }
                }
            }
        })
    }
}

/// What a Query returns: whole items, keys (an index projection), or only
/// their number.
#[derive(Clone, Copy)]
enum Want {
    Items { consistent: bool },
    Keys,
    Count,
}

/// The index's name in the table definition.
fn index_name(index: Index) -> &'static str {
    match index {
        Index::Gsi1 => "GSI1",
        Index::Gsi2 => "GSI2",
        Index::Gsi3 => "GSI3",
        Index::Gsi4 => "GSI4",
    }
}

/// `ConditionalCheckFailed on PK / SK` for each item whose check failed.
fn describe_reasons(reasons: &[String], keys: &[Key]) -> String {
    let failed: Vec<String> = reasons
        .iter()
        .zip(keys)
        .filter(|(r, _)| r.as_str() != "None")
        .map(|(r, k)| format!("{r} on {} / {}", k.pk, k.sk))
        .collect();
    if failed.is_empty() {
        reasons.join(", ")
    } else {
        failed.join("; ")
    }
}

/// `#pk = :pk [AND begins_with(#sk, :prefix)]`.
fn key_condition(
    p: &mut Placeholders,
    pk_attr: &str,
    sk_attr: &str,
    pk: &str,
    prefix: &str,
) -> String {
    let n = p.name(pk_attr);
    let mut cond = format!("{n} = {}", p.value(super::AttrValue::s(pk)));
    if !prefix.is_empty() {
        let s = p.name(sk_attr);
        cond.push_str(&format!(
            " AND begins_with({s}, {})",
            p.value(super::AttrValue::s(prefix))
        ));
    }
    cond
}

/// A store call's result, completed by [`DynamoStore::timed`] outside the
/// SDK's runtime (see [`DynamoStore::with_stack`]).
trait Settled {
    fn settled(self, store: &DynamoStore) -> Self;
}

impl<T> Settled for Result<T, StoreError> {
    fn settled(self, store: &DynamoStore) -> Self {
        self.map_err(|e| store.with_stack(e))
    }
}

impl<T> Settled for Vec<Result<T, StoreError>> {
    fn settled(self, store: &DynamoStore) -> Self {
        self.into_iter().map(|r| r.settled(store)).collect()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn endpoints_are_checked_before_the_sdk_sees_them() {
        for ok in [
            "http://127.0.0.1:5000",
            "https://dynamodb.eu-west-1.amazonaws.com",
            "http://localhost:8000/",
            "http://[::1]:8000",
        ] {
            assert!(super::check_endpoint(ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("not a url", "http:// or https://"),
            ("127.0.0.1:5000", "http:// or https://"),
            ("ftp://x:21", "http:// or https://"),
            ("http://", "no host"),
            ("http://:5000", "no host"),
            ("http://h:99999", "port"),
            ("http://h:x", "port"),
            ("http://h :1", "whitespace"),
        ] {
            let e = super::check_endpoint(bad).unwrap_err().to_string();
            assert!(e.contains(why) && !e.contains('\n'), "{bad}: {e}");
        }
    }
}
