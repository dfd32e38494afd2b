//! Kafka's zig-zag variable-length integers (protobuf style), as used inside v2 records.

/// Appends `value` as a zig-zag varint (Kafka `varint`, 32-bit).
pub fn put_varint(out: &mut Vec<u8>, value: i32) {
    put_varlong(out, i64::from(value));
}

/// Appends `value` as a zig-zag varlong (Kafka `varlong`, 64-bit).
pub fn put_varlong(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a zig-zag varlong from the front of `buf`; returns the value and the bytes used,
/// or `None` when `buf` ends early or the encoding is longer than 10 bytes.
pub fn get_varlong(buf: &[u8]) -> Option<(i64, usize)> {
    let mut raw: u64 = 0;
    for (i, byte) in buf.iter().take(10).enumerate() {
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let value = ((raw >> 1) as i64) ^ -((raw & 1) as i64);
            return Some((value, i + 1));
        }
    }
    None
}

/// Number of bytes `put_varlong(value)` writes.
pub fn varlong_len(value: i64) -> usize {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_edge_values() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            300,
            i64::from(i32::MAX),
            i64::MIN,
            i64::MAX,
        ] {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert_eq!(out.len(), varlong_len(v));
            assert_eq!(get_varlong(&out), Some((v, out.len())));
        }
    }

    #[test]
    fn truncated_input_is_none() {
        assert_eq!(get_varlong(&[0x80, 0x80]), None);
        assert_eq!(get_varlong(&[]), None);
    }
}
