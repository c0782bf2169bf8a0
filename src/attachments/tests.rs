use super::*;
use pretty_assertions::assert_eq;

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

fn offered(name: &str, size: u64, at: Option<&str>) -> Offered {
    Offered {
        name: name.to_string(),
        content_type: None,
        size,
        at: at.map(str::to_string),
    }
}

#[test]
fn images_are_known_by_their_magic_bytes_not_their_names() {
    assert_eq!(kind(PNG), Kind::Image(Image::Png));
    assert_eq!(
        kind(&[0xff, 0xd8, 0xff, 0xe0, 0, 0]),
        Kind::Image(Image::Jpeg)
    );
    assert_eq!(kind(b"GIF89a\x01\0"), Kind::Image(Image::Gif));
    assert_eq!(kind(b"GIF87a"), Kind::Image(Image::Gif));
    assert_eq!(kind(b"RIFF\x10\0\0\0WEBPVP8 "), Kind::Image(Image::Webp));
    assert_eq!(kind(b"RIFF\x10\0\0\0WAVEfmt "), Kind::Binary);
    assert_eq!(kind(b"\x89PNG is what the log says\n"), Kind::Text);
    assert_eq!(kind(b"plain text\n"), Kind::Text);
    assert_eq!(kind(b""), Kind::Text);
    assert_eq!(kind(b"ELF\0\x01"), Kind::Binary);
    assert_eq!(type_of(PNG), "image/png");
    assert_eq!(type_of(b"log\n"), "text/plain");
    assert_eq!(type_of(b"\0\x01"), "application/octet-stream");
}

#[test]
fn an_image_part_is_a_base64_data_url() {
    let part = image_part(Image::Gif, b"GIF89a");
    assert_eq!(
        serde_json::to_value(&part).unwrap(),
        serde_json::json!({"type": "image_url", "image_url": {"url": "data:image/gif;base64,R0lGODlh"}})
    );
}

#[test]
fn bounds_refuse_by_count_size_total_and_host_with_reasons() {
    let cfg = AttachmentsConfig {
        max_count: 3,
        max_bytes: 100,
        max_total_bytes: 150,
        dir: ".harness/attachments".into(),
    };
    let on = |at: &str| at.starts_with("http://127.0.0.1:3000/");
    let got = admit(
        &[
            offered(
                "a.log",
                80,
                Some("http://127.0.0.1:3000/attachments/download/1/a.log"),
            ),
            offered("big.bin", 101, None),
            offered("b.log", 80, None),
            offered("c.log", 70, None),
            offered("evil.png", 1, Some("http://example.com/x.png")),
            offered("d.log", 1, None),
            offered("e.log", 1, None),
        ],
        &cfg,
        &on,
    );
    assert_eq!(
        got,
        vec![
            Ok(()),
            Err("refused: larger than [intake].max_attachment_bytes (100 bytes)".into()),
            Err("refused: with it the attachments would pass [intake].max_attachments_total_bytes (150 bytes)".into()),
            Ok(()),
            Err("refused: its content_url \"http://example.com/x.png\" is not on the tracker, and nothing is downloaded from any other host".into()),
            Err("refused: with it the attachments would pass [intake].max_attachments_total_bytes (150 bytes)".into()),
            Err("refused: with it the attachments would pass [intake].max_attachments_total_bytes (150 bytes)".into()),
        ]
    );
    let few = AttachmentsConfig {
        max_count: 1,
        ..cfg
    };
    let got = admit(&[offered("a", 1, None), offered("b", 1, None)], &few, &on);
    assert_eq!(
        got,
        vec![
            Ok(()),
            Err("refused: more attachments than [intake].max_attachments (1)".into())
        ]
    );
}

#[test]
fn names_are_made_safe_and_unique() {
    assert_eq!(
        safe_names(&[
            "../../etc/passwd",
            "a b.log",
            "a b.log",
            ".env",
            "",
            "C:\\x\\y.txt",
            "a_b.log"
        ]),
        vec![
            "passwd",
            "a_b.log",
            "a_b-2.log",
            "env",
            "attachment",
            "y.txt",
            "a_b-3.log"
        ]
    );
    assert_eq!(safe_names(&[&"x".repeat(300)])[0].len(), 100);
}

#[test]
fn the_listing_says_name_type_size_and_fate() {
    let listed = vec![
        Listed {
            name: "shot.png".into(),
            content_type: "image/png".into(),
            size: 68,
            fate: Fate::Image(".harness/attachments/shot.png".into(), Ok(())),
        },
        Listed {
            name: "app.log".into(),
            content_type: "text/plain".into(),
            size: 120,
            fate: Fate::Text(".harness/attachments/app.log".into()),
        },
        Listed {
            name: "big\nname.bin".into(),
            content_type: "application/octet-stream".into(),
            size: 9_000_000,
            fate: Fate::Refused(
                "refused: larger than [intake].max_attachment_bytes (4194304 bytes)".into(),
            ),
        },
        Listed {
            name: "plot.gif".into(),
            content_type: "image/gif".into(),
            size: 6,
            fate: Fate::Image(
                ".harness/attachments/plot.gif".into(),
                Err("tier mopac-primary is not a vision tier ([models.vision] tiers)".into()),
            ),
        },
    ];
    assert_eq!(
        listing(&listed),
        "[harness] The task has 4 attachments:\n\
         - shot.png (image/png, 68 bytes): image, shown to you with this message; also at .harness/attachments/shot.png\n\
         - app.log (text/plain, 120 bytes): text, placed read-only at .harness/attachments/app.log (secrets masked): read it with read_file\n\
         - big name.bin (application/octet-stream, 9000000 bytes): refused: larger than [intake].max_attachment_bytes (4194304 bytes)\n\
         - plot.gif (image/gif, 6 bytes): image at .harness/attachments/plot.gif, not shown: tier mopac-primary is not a vision tier ([models.vision] tiers)"
    );
    assert_eq!(listing(&[]), "");
    // Thousands of refused ones are counted past the first hundred lines; a placed one is
    // always listed.
    let refused = Listed {
        name: "x.log".into(),
        content_type: "text/plain".into(),
        size: 1,
        fate: Fate::Refused("refused: more attachments than [intake].max_attachments (10)".into()),
    };
    let mut many = vec![refused; 5000];
    many.push(listed[1].clone());
    let text = listing(&many);
    assert_eq!(text.lines().count(), 1 + 100 + 1 + 1, "{text}");
    assert!(text.contains("\n- app.log (text/plain, 120 bytes): text, placed"));
    assert!(
        text.ends_with("\n- ... and 4900 more, refused and not listed"),
        "{text}"
    );
    assert_eq!(section(&many).unwrap().lines().count(), 2 + 100 + 1 + 1);
    let section = section(&listed[1..2]).unwrap();
    assert_eq!(
        section,
        "## Attachments\n\n- app.log (text/plain, 120 bytes): text, placed read-only at .harness/attachments/app.log (secrets masked): read it with read_file\n"
    );
    assert_eq!(super::section(&[]), None);
}

#[test]
fn the_opening_message_gets_the_listing_and_the_images() {
    let messages = vec![
        Message::System {
            content: "s".into(),
        },
        Message::user("fix it"),
    ];
    let image = image_part(Image::Png, PNG);
    let listed = vec![Listed {
        name: "a.png".into(),
        content_type: "image/png".into(),
        size: 1,
        fate: Fate::Image("d/a.png".into(), Ok(())),
    }];
    let list = "[harness] The task has 1 attachment:\n- a.png (image/png, 1 bytes): image, shown to you with this message; also at d/a.png";
    let with_image = Attached {
        listed: listed.clone(),
        images: vec![image.clone()],
    };
    let out = into_opening(messages.clone(), &with_image);
    assert_eq!(
        out[1],
        Message::User {
            content: Content::Parts(vec![
                Part::Text {
                    text: format!("fix it\n\n{list}")
                },
                image
            ])
        }
    );
    let listed_only = Attached {
        listed,
        images: vec![],
    };
    assert_eq!(
        into_opening(messages.clone(), &listed_only)[1],
        Message::user(format!("fix it\n\n{list}"))
    );
    assert_eq!(
        into_opening(messages.clone(), &Attached::default()),
        messages
    );
}

#[test]
fn content_parts_round_trip_through_json() {
    let m = Message::User {
        content: Content::Parts(vec![
            Part::Text {
                text: "look".into(),
            },
            image_part(Image::Png, PNG),
        ]),
    };
    let v = serde_json::to_value(&m).unwrap();
    assert_eq!(
        v["content"][0],
        serde_json::json!({"type": "text", "text": "look"})
    );
    assert_eq!(v["content"][1]["type"], "image_url");
    assert_eq!(serde_json::from_value::<Message>(v).unwrap(), m);
    let plain = serde_json::to_value(Message::user("hi")).unwrap();
    assert_eq!(plain, serde_json::json!({"role": "user", "content": "hi"}));
}

#[test]
fn an_image_holding_a_secret_is_refused_whole() {
    let mut r = crate::secrets::Redactor::default();
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";
    assert_eq!(secret_in_image(png, &r), None);
    r.add(&crate::secrets::Secret::new("sk-image-canary-123456"));
    assert_eq!(secret_in_image(png, &r), None);
    let mut tagged = png.to_vec();
    tagged.extend_from_slice(b"\0\0\0\x1ctEXtComment\0key sk-image-canary-123456\xff\xfe");
    assert!(
        secret_in_image(&tagged, &r).is_some_and(|why| why.contains("an image cannot be masked"))
    );
}
