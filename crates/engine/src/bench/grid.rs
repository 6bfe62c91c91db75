//! Grids of engine settings: `key=v1,v2,v3` per swept key (any
//! [`EngineConfig`] key, values as [`EngineConfig::apply_override`] reads
//! them), and the cartesian product of the keys.
//!
//! Values are split at commas outside brackets and quotes, so a TOML array
//! is one value: `gpus=[0],[0,1]` sweeps two values.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::config::EngineConfig;
use crate::error::{EngineError, Result};

/// One swept key and its values, in the order given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Axis {
    pub key: String,
    pub values: Vec<String>,
}

impl Axis {
    /// Parses `key=v1,v2,...`.
    pub fn parse(text: &str) -> Result<Axis> {
        let bad = |why: &str| {
            EngineError::Config(format!(
                "grid `{text}`: {why} (expected key=v1,v2,..., e.g. workers_per_device=1,2,3)"
            ))
        };
        let (key, values) = text.split_once('=').ok_or_else(|| bad("no `=`"))?;
        let key = key.trim();
        if key.is_empty() {
            return Err(bad("no key"));
        }
        let values = split_values(values).map_err(|why| bad(&why))?;
        if values.iter().any(String::is_empty) {
            return Err(bad("an empty value"));
        }
        for (i, v) in values.iter().enumerate() {
            if values[..i].contains(v) {
                return Err(bad(&format!("`{v}` is given twice")));
            }
        }
        Ok(Axis {
            key: key.to_owned(),
            values,
        })
    }
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key, self.values.join(","))
    }
}

/// Splits at commas that are outside brackets, braces and quotes, trimming
/// each value: a grid axis's values, or a list of `key=value` overrides
/// (`device_memory_limit=16GiB,gpus=[0,1]` is two). Errors on an unbalanced
/// bracket or an unclosed quote.
pub fn split_values(text: &str) -> std::result::Result<Vec<String>, String> {
    let mut values = Vec::new();
    let mut current = String::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{') => depth += 1,
            (None, ']' | '}') => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!("unbalanced `{c}`"));
                }
            }
            (None, ',') if depth == 0 => {
                values.push(current.trim().to_owned());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if quote.is_some() || depth != 0 {
        return Err("an unclosed bracket or quote".into());
    }
    values.push(current.trim().to_owned());
    Ok(values)
}

/// Swept keys; their cartesian product is the set of grid points.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grid {
    pub axes: Vec<Axis>,
}

/// One grid point: a value for every swept key, in the grid's key order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Point(pub Vec<(String, String)>);

impl Point {
    /// The `key=value` overrides that set this point.
    pub fn overrides(&self) -> impl Iterator<Item = String> + '_ {
        self.0.iter().map(|(k, v)| format!("{k}={v}"))
    }

    /// The value of `key` at this point.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

impl fmt::Display for Point {
    /// `key=value,key=value`; `default` for the point of an empty grid.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("default");
        }
        let parts: Vec<String> = self.overrides().collect();
        f.write_str(&parts.join(","))
    }
}

impl Grid {
    /// Parses one `key=v1,v2` per entry; a key given twice is an error.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Grid> {
        let mut axes: Vec<Axis> = Vec::new();
        for entry in entries {
            let axis = Axis::parse(entry.as_ref())?;
            if axes.iter().any(|a| a.key == axis.key) {
                return Err(EngineError::Config(format!(
                    "grid key `{}` is given twice; put all its values in one --grid {}=...",
                    axis.key, axis.key
                )));
            }
            axes.push(axis);
        }
        Ok(Grid { axes })
    }

    /// Checks every value of every key against `base` (unknown keys and
    /// values the configuration refuses are named).
    pub fn validate(&self, base: &EngineConfig) -> Result<()> {
        for axis in &self.axes {
            for value in &axis.values {
                base.clone()
                    .apply_override(&format!("{}={value}", axis.key))
                    .map_err(|e| {
                        EngineError::Config(format!("grid value {}={value}: {e}", axis.key))
                    })?;
            }
        }
        Ok(())
    }

    /// Every combination of values, the last key varying fastest; one empty
    /// point for an empty grid.
    pub fn points(&self) -> Vec<Point> {
        let mut points = vec![Point(Vec::new())];
        for axis in &self.axes {
            points = points
                .into_iter()
                .flat_map(|p| {
                    axis.values.iter().map(move |v| {
                        let mut next = p.0.clone();
                        next.push((axis.key.clone(), v.clone()));
                        Point(next)
                    })
                })
                .collect();
        }
        points
    }

    /// The swept keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.axes.iter().map(|a| a.key.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Auto;

    #[test]
    fn axes_parse_with_brackets_quotes_and_spaces() {
        let a = Axis::parse("workers_per_device = 1, 2 ,3").unwrap();
        assert_eq!(a.key, "workers_per_device");
        assert_eq!(a.values, ["1", "2", "3"]);
        assert_eq!(a.to_string(), "workers_per_device=1,2,3");
        let a = Axis::parse("gpus=[0],[0,1]").unwrap();
        assert_eq!(a.values, ["[0]", "[0,1]"]);
        let a = Axis::parse("host_memory_budget=\"1,5GiB\",auto").unwrap();
        assert_eq!(a.values, ["\"1,5GiB\"", "auto"]);
        for bad in [
            "workers_per_device",
            "=1,2",
            "k=1,,2",
            "k=",
            "k=[1",
            "k=1]",
            "k=1,1",
        ] {
            assert!(Axis::parse(bad).is_err(), "{bad}");
        }
        let err = Axis::parse("k=1,1").unwrap_err().to_string();
        assert!(err.contains("`1` is given twice"), "{err}");
    }

    #[test]
    fn override_lists_split_outside_brackets() {
        assert_eq!(
            split_values("device_memory_limit=16GiB, gpus=[0,1]").unwrap(),
            ["device_memory_limit=16GiB", "gpus=[0,1]"]
        );
        assert_eq!(split_values("gpus=[0]").unwrap(), ["gpus=[0]"]);
        assert!(split_values("gpus=[0,1").is_err());
    }

    #[test]
    fn points_are_the_cartesian_product_last_key_fastest() {
        let grid = Grid::parse(&["workers_per_device=1,2,3", "synthesis_concurrency=2,4"]).unwrap();
        let points: Vec<String> = grid.points().iter().map(ToString::to_string).collect();
        assert_eq!(
            points,
            [
                "workers_per_device=1,synthesis_concurrency=2",
                "workers_per_device=1,synthesis_concurrency=4",
                "workers_per_device=2,synthesis_concurrency=2",
                "workers_per_device=2,synthesis_concurrency=4",
                "workers_per_device=3,synthesis_concurrency=2",
                "workers_per_device=3,synthesis_concurrency=4",
            ]
        );
        let p = &grid.points()[3];
        assert_eq!(p.get("workers_per_device"), Some("2"));
        assert_eq!(p.get("backend"), None);
        let config = EngineConfig::default()
            .with_overrides(p.overrides().collect::<Vec<_>>().iter().map(String::as_str))
            .unwrap();
        assert_eq!(config.workers_per_device, Auto::Value(2));
        assert_eq!(config.synthesis_concurrency, Auto::Value(4));
        assert_eq!(
            grid.keys().collect::<Vec<_>>(),
            ["workers_per_device", "synthesis_concurrency"]
        );

        let empty = Grid::parse::<&str>(&[]).unwrap();
        assert_eq!(empty.points().len(), 1);
        assert_eq!(empty.points()[0].to_string(), "default");
        let three = Grid::parse(&["a=1,2", "b=x,y,z", "c=7"]).unwrap();
        assert_eq!(three.points().len(), 6);
    }

    #[test]
    fn keys_and_values_are_checked_against_the_configuration() {
        let base = EngineConfig::default();
        Grid::parse(&["gpu_abc=true,false", "gpus=[0],[0,1]"])
            .unwrap()
            .validate(&base)
            .unwrap();
        let err = Grid::parse(&["worker_per_device=1,2"])
            .unwrap()
            .validate(&base)
            .unwrap_err()
            .to_string();
        assert!(err.contains("worker_per_device"), "{err}");
        let err = Grid::parse(&["workers_per_device=1,many"])
            .unwrap()
            .validate(&base)
            .unwrap_err()
            .to_string();
        assert!(err.contains("workers_per_device=many"), "{err}");
        let err = Grid::parse(&["a=1", "a=2"]).unwrap_err().to_string();
        assert!(err.contains("given twice"), "{err}");
    }
}
