//! Runtime configuration in Java properties format (Druid's `runtime.properties`), with the
//! spec's property names (`service.plaintextPort`, ...).
//!
//! Precedence, lowest to highest: built-in defaults, the `--config` file, `DOLMEN_*`
//! environment variables, command-line flags. (GreptimeDB ranks the file above the environment;
//! Dolmen follows Quickwit and 12-factor practice: the environment overrides the file, so a
//! container can adjust one setting without rewriting the file.)

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

/// An error reading or interpreting configuration; the message names the file or property.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file [{path}]: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A property has a value of the wrong shape.
    #[error("invalid value [{value}] for property [{key}]: {reason}")]
    InvalidValue {
        /// Property name.
        key: String,
        /// The value found.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
}

/// Properties parsed from a Java `.properties` file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Properties {
    map: BTreeMap<String, String>,
}

impl Properties {
    /// Parses Java properties text: `key=value`, `key: value` or `key value` lines, `#` and `!`
    /// comments, backslash line continuations and the escapes `\t \n \r \f \\ \uXXXX`
    /// (`java.util.Properties.load`).
    pub fn parse(text: &str) -> Properties {
        let mut map = BTreeMap::new();
        let mut logical = String::new();
        let mut lines = text.lines().peekable();
        while let Some(raw) = lines.next() {
            let line = raw.trim_start();
            if logical.is_empty()
                && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
            {
                continue;
            }
            // A line ending in an odd number of backslashes continues on the next line.
            let trailing = line.chars().rev().take_while(|c| *c == '\\').count();
            if trailing % 2 == 1 {
                logical.push_str(&line[..line.len() - 1]);
                if lines.peek().is_some() {
                    continue;
                }
            } else {
                logical.push_str(line);
            }
            let (k, v) = split_key_value(&logical);
            map.insert(unescape(&k), unescape(&v));
            logical.clear();
        }
        Properties { map }
    }

    /// Reads and parses a properties file.
    ///
    /// # Errors
    /// [`ConfigError::Io`] when the file cannot be read.
    pub fn load(path: &Path) -> Result<Properties, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Properties::parse(&text))
    }

    /// The raw value of a property.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.map.get(key).map(String::as_str)
    }

    /// Sets a property.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.map.insert(key.into(), value.into());
    }

    /// The value of a property parsed as `T`.
    ///
    /// # Errors
    /// [`ConfigError::InvalidValue`] naming the property when the value does not parse.
    pub fn get_parsed<T: FromStr>(&self, key: &str) -> Result<Option<T>, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse::<T>()
                .map(Some)
                .map_err(|e| ConfigError::InvalidValue {
                    key: key.to_string(),
                    value: v.to_string(),
                    reason: e.to_string(),
                }),
        }
    }

    /// All properties, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

fn split_key_value(line: &str) -> (String, String) {
    let mut key = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                key.push('\\');
                if let Some(n) = chars.next() {
                    key.push(n);
                }
            }
            '=' | ':' => break,
            c if c.is_whitespace() => {
                // Skip whitespace, then an optional separator.
                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                    chars.next();
                }
                if chars.peek().is_some_and(|c| *c == '=' || *c == ':') {
                    chars.next();
                }
                break;
            }
            c => key.push(c),
        }
    }
    let value: String = chars.collect::<String>().trim_start().to_string();
    (key, value)
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_java_properties() {
        let p = Properties::parse(
            "# comment\n! also\nservice.plaintextPort=8082\nservice.host : example\nkey value with spaces\nlong=a\\\n   b\nesc=tab\\there\\u0041\n",
        );
        assert_eq!(p.get("service.plaintextPort"), Some("8082"));
        assert_eq!(p.get("service.host"), Some("example"));
        assert_eq!(p.get("key"), Some("value with spaces"));
        assert_eq!(p.get("long"), Some("ab"));
        assert_eq!(p.get("esc"), Some("tab\thereA"));
        assert_eq!(
            p.get_parsed::<u16>("service.plaintextPort").unwrap(),
            Some(8082)
        );
        let e = p.get_parsed::<u16>("service.host").unwrap_err();
        assert!(e.to_string().contains("service.host"));
    }
}
