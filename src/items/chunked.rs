//! Data that grows with the manifest, split into items DynamoDB accepts.
//!
//! Our own items that list levels or resources (the apply digests, the
//! entity-count journal, the managed set beyond the `#PROVISIONER` record)
//! can outgrow DynamoDB's 400 KB item limit. Each is written as numbered
//! chunks, each measured the way the stores measure an item
//! ([`crate::store::emulate::item_size`], a little above DynamoDB's own
//! count), so no chunk is ever refused, whatever the names' lengths.

use crate::store::emulate::{item_size, MAX_ITEM_BYTES};
use crate::store::typed_json::value_to_json;
use crate::store::{AttrValue, Item};

/// The most bytes one chunk item holds: well under the item limit, so a
/// chunk never meets it whatever the measure.
pub const LIMIT: usize = MAX_ITEM_BYTES - 50_000;

/// The bytes `v` adds as one more element of a list: its typed JSON and a comma.
pub fn list_element_size(v: &AttrValue) -> usize {
    value_to_json(v).to_string().len() + 1
}

/// The bytes `key: v` adds as one more entry of a map.
pub fn map_entry_size(key: &str, v: &AttrValue) -> usize {
    serde_json::Value::String(key.to_string()).to_string().len() + 1 + list_element_size(v)
}

/// The room left for growing data in `base` (the item with its growing
/// attributes empty) when the item may hold at most `limit` bytes.
pub fn room(base: &Item, limit: usize) -> usize {
    limit.saturating_sub(item_size(base))
}

/// Splits `entries`, in order, into parts whose sizes add up to at most
/// `room` each; an entry larger than `room` gets a part of its own (and the
/// store refuses it with a clear error). Always at least one part.
pub fn split<T>(
    entries: impl IntoIterator<Item = T>,
    room: usize,
    size: impl Fn(&T) -> usize,
) -> Vec<Vec<T>> {
    let mut parts: Vec<Vec<T>> = vec![Vec::new()];
    let mut used = 0;
    for e in entries {
        let n = size(&e);
        let last = parts.len() - 1;
        if !parts[last].is_empty() && used + n > room {
            parts.push(Vec::new());
            used = 0;
        }
        used += n;
        let last = parts.len() - 1;
        parts[last].push(e);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::item::keyed;
    use std::collections::BTreeMap;

    #[test]
    fn entry_sizes_add_up_to_the_measured_item() {
        let names: Vec<String> = (0..50).map(|i| format!("näme-\"{i}\"")).collect();
        let mut item = keyed("p", "s", &[("l", AttrValue::L(vec![]))]);
        let empty = item_size(&item);
        let list: Vec<AttrValue> = names.iter().map(AttrValue::s).collect();
        let sum: usize = list.iter().map(list_element_size).sum();
        item.insert("l".into(), AttrValue::L(list));
        // A list of n elements has n-1 commas.
        assert_eq!(item_size(&item), empty + sum - 1);

        let mut item = keyed("p", "s", &[("m", AttrValue::M(BTreeMap::new()))]);
        let empty = item_size(&item);
        let map: BTreeMap<String, AttrValue> = names
            .iter()
            .map(|n| (n.clone(), AttrValue::L(vec![AttrValue::s("r")])))
            .collect();
        let sum: usize = map.iter().map(|(k, v)| map_entry_size(k, v)).sum();
        item.insert("m".into(), AttrValue::M(map));
        assert_eq!(item_size(&item), empty + sum - 1);
    }

    #[test]
    fn parts_stay_within_the_room_and_keep_the_order() {
        let parts = split(1..=10, 10, |n| *n);
        assert_eq!(
            parts,
            vec![
                vec![1, 2, 3, 4],
                vec![5],
                vec![6],
                vec![7],
                vec![8],
                vec![9],
                vec![10]
            ]
        );
        assert_eq!(split(Vec::<u8>::new(), 10, |_| 1), vec![Vec::<u8>::new()]);
        assert_eq!(split([20], 10, |n| *n), vec![vec![20]]);
    }
}
