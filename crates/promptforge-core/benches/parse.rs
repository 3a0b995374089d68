//! Parse + compile throughput for a 200-section prompt.
#![allow(clippy::expect_used, missing_docs)]

use std::fmt::Write as _;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use promptforge_core::{NullObserver, Prompt};

/// A realistic prompt: each section has a prologue, prose with placeholders, an epilog, and
/// every tenth one a list.
fn prompt_with_sections(count: usize) -> String {
    let mut source = String::from(
        "---\nname: bench\ndescription: a 200-section prompt\npromptforge: 1\n---\n\n# Bench\n\n\
         ```lua shared\nfunction helper(x) return x .. \"!\" end\n```\n\n",
    );
    for i in 0..count {
        let _ = write!(
            source,
            "## Section {i}\n\n```lua\nvar.step = {i}\nlocal note = helper(\"s{i}\")\nif var.step > 1000 then return note end\n```\n\n\
             Summarise step {{{{ var.step }}}} for {{{{ args }}}} and mention {{{{ sys.id }}}}.\n\
             Keep it short and cite the store file notes/{i}.md.\n\n```lua\nstore.append(\"log.txt\", \"{i}\\n\")\n```\n\n"
        );
        if i % 10 == 0 {
            let _ = write!(
                source,
                "### List {i}\n\n---\n\n- alpha\n- beta\n- gamma\n\n"
            );
        }
    }
    source
}

fn parse(c: &mut Criterion) {
    let source = prompt_with_sections(200);
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Bytes(source.len() as u64));
    group.bench_function("200_sections", |b| {
        b.iter(|| Prompt::parse(&source, "bench", &NullObserver).expect("parses"));
    });
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
