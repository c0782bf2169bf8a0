//! Config stage, the file read (filesystem adapter): which file (`--config`, else
//! `$HARNESS_CONFIG`, else `./harness.toml`) and its text (a regular file of at most
//! [`crate::bounded::CONFIG_MAX`]), handed to the PURE [`super::parse_reading`] with a reader
//! for the files it names (the result schema, at most [`crate::result_schema::SCHEMA_MAX`]).

use std::path::PathBuf;

use anyhow::Context;

use super::Config;
use crate::secrets::Redactor;

/// `--config`, else `$HARNESS_CONFIG`, else `./harness.toml`.
pub fn config_path(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| std::env::var_os("HARNESS_CONFIG").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("harness.toml"))
}

/// Reads and validates the config file; the error names the file and how to choose another.
/// A password in a URL (`[litellm].base_url`, `[redmine].url`) is masked by `redactor` from
/// here on, in every output.
pub fn load(flag: Option<PathBuf>, redactor: &mut Redactor) -> anyhow::Result<Config> {
    let path = config_path(flag);
    let text = crate::bounded::read_text(&path, crate::bounded::CONFIG_MAX).with_context(|| {
        format!(
            "cannot read config {} (use --config PATH or HARNESS_CONFIG; harness.toml.example documents every key)",
            path.display()
        )
    })?;
    // The result schema is read here, bounded, so the validation stays pure.
    let read = |p: &std::path::Path| crate::bounded::read_text(p, crate::result_schema::SCHEMA_MAX);
    let cfg = super::parse_reading(&text, &path, &read)?;
    for url in cfg
        .litellm
        .base_url
        .iter()
        .chain(cfg.redmine.iter().map(|r| &r.url))
        .chain(cfg.forge.iter().map(|f| &f.url))
    {
        redactor.add_url(url);
    }
    Ok(cfg)
}
