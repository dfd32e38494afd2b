//! Text formats of client settings: Java `.properties` files and `sasl.jaas.config`.

use std::collections::HashMap;

/// Java `.properties` text into pairs (see [`ClientSecurity::read_properties_file`]).
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let first = line.trim_start();
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        // Join continuation lines: an odd number of trailing backslashes.
        let mut logical = first.to_string();
        while ends_with_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        let key = unescape(key).map_err(|e| format!("line {}: {e}", n + 1))?;
        let value = unescape(value).map_err(|e| format!("line {}: {e}", n + 1))?;
        out.push((key, value));
    }
    Ok(out)
}

fn ends_with_continuation(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// The raw key and value: the key ends at the first unescaped `=`, `:` or whitespace.
fn split_key_value(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' | b' ' | b'\t' | b'\x0c' => break,
            _ => i += 1,
        }
    }
    let i = i.min(bytes.len());
    let key = &line[..i];
    let mut rest = line[i..].trim_start_matches([' ', '\t', '\x0c']);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches([' ', '\t', '\x0c']);
    }
    (key, rest)
}

fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let ch = u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)
                    .and_then(char::from_u32)
                    .ok_or_else(|| format!("bad \\u escape \\u{hex}"))?;
                out.push(ch);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

/// The options of a one-module JAAS entry: `<class> <flag> name=value ... ;`, values bare or
/// quoted (`"` or `'`, `\` escaping the next character). Any login module is accepted: only
/// `username` and `password` are used.
pub(super) fn parse_jaas(text: &str) -> Result<HashMap<String, String>, String> {
    let mut tokens = jaas_tokens(text)?.into_iter().peekable();
    let is_word =
        |t: &Option<(String, bool)>| matches!(t, Some((w, false)) if w != "=" && w != ";");
    let class = tokens.next();
    if !is_word(&class) {
        return Err("expected a login module class name first".into());
    }
    let flag = tokens.next();
    match &flag {
        Some((f, false))
            if ["required", "requisite", "sufficient", "optional"]
                .contains(&f.to_ascii_lowercase().as_str()) => {}
        _ => {
            return Err(
                "expected a control flag (required, requisite, sufficient or optional) after \
                 the login module"
                    .into(),
            )
        }
    }
    let mut options = HashMap::new();
    loop {
        match tokens.next() {
            None => break,
            Some((t, false)) if t == ";" => {
                if tokens.peek().is_some() {
                    return Err("only one login module may be given".into());
                }
                break;
            }
            Some((name, false)) if name != "=" => {
                if !matches!(tokens.next(), Some((eq, false)) if eq == "=") {
                    return Err(format!("expected '=' after option {name:?}"));
                }
                match tokens.next() {
                    Some((value, quoted)) if quoted || (value != "=" && value != ";") => {
                        options.insert(name, value);
                    }
                    _ => return Err(format!("option {name:?} has no value")),
                }
            }
            Some((t, _)) => return Err(format!("unexpected {t:?}")),
        }
    }
    Ok(options)
}

/// Splits JAAS text into (token, was quoted): words, quoted strings, `=` and `;`.
fn jaas_tokens(text: &str) -> Result<Vec<(String, bool)>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '=' | ';' => out.push((c.to_string(), false)),
            '"' | '\'' => {
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None => return Err("unterminated quoted value".into()),
                        Some(q) if q == c => break,
                        Some('\\') => match chars.next() {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some('r') => s.push('\r'),
                            Some(e) => s.push(e),
                            None => return Err("unterminated quoted value".into()),
                        },
                        Some(ch) => s.push(ch),
                    }
                }
                out.push((s, true));
            }
            _ => {
                let mut s = c.to_string();
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || matches!(n, '=' | ';' | '"' | '\'') {
                        break;
                    }
                    s.push(n);
                    chars.next();
                }
                out.push((s, false));
            }
        }
    }
    Ok(out)
}
