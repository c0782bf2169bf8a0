//! Intake adapter, PURE: the config's `[demo]` section in, the demo [`Task`] out.

use super::{Source, Task};
use crate::config::DemoConfig;

/// The demo task described by `[demo]`.
pub(crate) fn task(demo: &DemoConfig) -> Task {
    Task {
        id: demo.id.clone(),
        source: Source::Demo,
        subject: crate::bounded::one_line(&demo.subject, super::SUBJECT_MAX),
        class: demo.class.clone(),
        prompt: demo.prompt.clone(),
        reply: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn demo_task_mirrors_the_section() {
        let demo = DemoConfig {
            id: "demo-1".into(),
            subject: "MVP demo".into(),
            prompt: "tell me about yourself".into(),
            class: Some("primary".into()),
        };
        assert_eq!(
            task(&demo),
            Task {
                id: "demo-1".into(),
                source: Source::Demo,
                subject: "MVP demo".into(),
                class: Some("primary".into()),
                prompt: "tell me about yourself".into(),
                reply: None,
            }
        );
    }
}
