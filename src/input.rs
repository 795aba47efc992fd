//! Bounded reads of what users hand us (a manifest, a response body, a trace
//! line): nothing is read past a stated cap, so `/dev/zero` or a 2 GB line
//! costs a bounded amount of memory and ends in a clear error.

use std::io::{self, BufRead, Read};
use std::path::Path;

/// Why a bounded read stopped.
#[derive(Debug, thiserror::Error)]
pub enum BoundedError {
    /// More than `max` bytes were there.
    #[error("larger than {}", bytes(*max))]
    TooLarge { max: u64 },
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// `max` for people: `64 MiB`, `1 MiB`, `512 KiB`, `100 bytes`.
pub fn bytes(max: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;
    if max >= MIB && max % MIB == 0 {
        format!("{} MiB", max / MIB)
    } else if max >= KIB && max % KIB == 0 {
        format!("{} KiB", max / KIB)
    } else {
        format!("{max} bytes")
    }
}

/// Reads everything from `src`, or fails once more than `max` bytes arrive
/// (reading at most `max + 1`).
pub fn read_to_end(src: impl Read, max: u64, buf: &mut Vec<u8>) -> Result<(), BoundedError> {
    let start = buf.len();
    src.take(max.saturating_add(1)).read_to_end(buf)?;
    if (buf.len() - start) as u64 > max {
        buf.truncate(start);
        return Err(BoundedError::TooLarge { max });
    }
    Ok(())
}

/// Reads the file at `path` whole, or standard input when `path` is `-`,
/// failing once more than `max` bytes arrive.
pub fn read_path(path: &Path, max: u64) -> Result<Vec<u8>, BoundedError> {
    let mut buf = Vec::new();
    if path.as_os_str() == "-" {
        read_to_end(io::stdin().lock(), max, &mut buf)?;
    } else {
        read_to_end(std::fs::File::open(path)?, max, &mut buf)?;
    }
    Ok(buf)
}

/// [`BufRead::read_line`], failing once a line grows past `max` bytes
/// (its newline included). Returns the bytes read, 0 at the end.
pub fn read_line(
    src: &mut impl BufRead,
    max: u64,
    buf: &mut String,
) -> Result<usize, BoundedError> {
    let n = src.take(max.saturating_add(1)).read_line(buf)?;
    if n as u64 > max {
        return Err(BoundedError::TooLarge { max });
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_past_the_cap() {
        let mut buf = Vec::new();
        read_to_end(&b"abcd"[..], 4, &mut buf).unwrap();
        assert_eq!(buf, b"abcd");
        let mut buf = Vec::new();
        let zeros = io::repeat(0);
        assert!(matches!(
            read_to_end(zeros, 1 << 20, &mut buf),
            Err(BoundedError::TooLarge { max }) if max == 1 << 20
        ));
        assert!(buf.is_empty());
        let mut src = io::BufReader::new(&b"short\nthis one is long\n"[..]);
        let mut line = String::new();
        assert_eq!(read_line(&mut src, 8, &mut line).unwrap(), 6);
        line.clear();
        let err = read_line(&mut src, 8, &mut line).unwrap_err();
        assert_eq!(err.to_string(), "larger than 8 bytes");
        assert_eq!(bytes(64 * 1024 * 1024), "64 MiB");
        assert_eq!(bytes(512 * 1024), "512 KiB");
    }
}
