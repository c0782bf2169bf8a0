//! Config stage, PURE: `[intake]`'s attachment keys (`max_attachments`,
//! `max_attachment_bytes`, `max_attachments_total_bytes`, `attachments_dir`) and
//! `[models.vision]` in, [`AttachmentsConfig`] and the set of vision tiers out, every
//! problem by key.

use std::collections::{BTreeMap, BTreeSet};

use super::raw::{RawIntake, RawVision};
use super::validate::Validator;
use super::AttachmentsConfig;

impl Validator {
    /// The attachment bounds and place of `[intake]`.
    pub(super) fn attachments(&mut self, raw: &RawIntake) -> AttachmentsConfig {
        let d = AttachmentsConfig::default();
        let max_count = self.int_in(
            "[intake].max_attachments",
            raw.max_attachments,
            d.max_count as i64,
            0,
            100,
        ) as usize;
        let max_bytes = self.int_in(
            "[intake].max_attachment_bytes",
            raw.max_attachment_bytes,
            d.max_bytes as i64,
            1,
            64 * 1024 * 1024,
        ) as u64;
        let max_total_bytes = self.int_in(
            "[intake].max_attachments_total_bytes",
            raw.max_attachments_total_bytes,
            d.max_total_bytes as i64,
            1,
            256 * 1024 * 1024,
        ) as u64;
        let dir = match &raw.attachments_dir {
            None => d.dir,
            Some(dir) => match attachments_dir(dir) {
                Ok(dir) => dir,
                Err(why) => {
                    self.problem("[intake].attachments_dir", why);
                    d.dir
                }
            },
        };
        AttachmentsConfig {
            max_count,
            max_bytes,
            max_total_bytes,
            dir,
        }
    }

    /// `[models.vision] tiers`: each a tier `[models]` defines.
    pub(super) fn vision(
        &mut self,
        raw: Option<RawVision>,
        tiers: &BTreeMap<String, Vec<String>>,
    ) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (i, tier) in raw
            .and_then(|v| v.tiers)
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            if tiers.contains_key(&tier) {
                out.insert(tier);
            } else {
                self.problem(
                    &format!("[models.vision].tiers[{i}]"),
                    format!("names tier {tier:?}, which [models] does not define"),
                );
            }
        }
        out
    }
}

/// `[intake].attachments_dir`: a directory relative to the work root, without `..`, not the
/// work root itself, and not inside `.git` (which git owns).
fn attachments_dir(dir: &str) -> Result<String, String> {
    let parts: Vec<&str> = dir
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if dir.starts_with('/') || parts.is_empty() || parts.contains(&"..") {
        return Err(format!(
            "must be a directory relative to the work root, without `..`, got {dir:?}"
        ));
    }
    if parts[0] == ".git" {
        return Err(format!("{dir:?} lies inside .git, which git owns"));
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::attachments_dir;

    #[test]
    fn the_attachments_dir_is_a_plain_relative_directory() {
        assert_eq!(attachments_dir("./in/files/").unwrap(), "in/files");
        assert_eq!(
            attachments_dir(".harness/attachments").unwrap(),
            ".harness/attachments"
        );
        for bad in ["/abs", "", ".", "a/../b", ".git/x"] {
            assert!(attachments_dir(bad).is_err(), "{bad}");
        }
    }
}
