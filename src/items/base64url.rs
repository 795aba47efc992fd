//! URL-safe base64 without padding (RFC 4648 §5): namespace ids and
//! reservation ids, which travel in keys, URLs and shell words.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Encodes `bytes` (no padding).
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let v = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((v >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// Decodes what [`encode`] writes; `None` for anything else (a foreign
/// character, a length no encoding has, or stray bits in the last character),
/// so every byte string has exactly one accepted spelling.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| ALPHABET.iter().position(|&a| a == c).map(|p| p as u32);
    let bytes = text.as_bytes();
    if bytes.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut v = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            v |= value(c)? << (18 - 6 * i);
        }
        let n = chunk.len() - 1;
        // Bits below the last whole byte must be zero (canonical form).
        if v & ((1 << (24 - 8 * n)) - 1) != 0 {
            return None;
        }
        out.extend_from_slice(&v.to_be_bytes()[1..=n]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        assert_eq!(encode(b""), "");
        assert_eq!(encode(b"f"), "Zg");
        assert_eq!(encode(b"fo"), "Zm8");
        assert_eq!(encode(b"foo"), "Zm9v");
        assert_eq!(encode(&[0xfb, 0xff]), "-_8");
        assert_eq!(decode("Zm8").as_deref(), Some(&b"fo"[..]));
        // "Zm9" and "Zh" carry stray bits below their last byte.
        for bad in ["Z", "Zm9", "Zh", "Zm+v", "Zm/v", "Zm9v="] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }

    proptest! {
        #[test]
        fn round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let text = encode(&bytes);
            prop_assert_eq!(decode(&text), Some(bytes));
        }

        #[test]
        fn accepts_only_canonical_text(text in "[A-Za-z0-9_-]{0,12}") {
            if let Some(bytes) = decode(&text) {
                prop_assert_eq!(encode(&bytes), text);
            }
        }
    }
}
