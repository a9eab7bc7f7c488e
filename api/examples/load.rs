//! A small HTTP load generator for `scripts/bench/api-throughput`: `CONCURRENCY`
//! workers send `GET <url>` with a bearer key for `SECONDS`, then it prints
//! requests per second and latency percentiles. Bounded in time and count, and
//! meant for loopback only.
//!
//! `cargo run --release -p weir-api --example load -- URL KEY [CONCURRENCY] [SECONDS]`

use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(url), Some(key)) = (args.get(1).cloned(), args.get(2).cloned()) else {
        eprintln!("usage: load URL KEY [CONCURRENCY] [SECONDS]");
        std::process::exit(2);
    };
    let concurrency: usize = args.get(3).map_or(Ok(32), |c| c.parse())?;
    let seconds: u64 = args.get(4).map_or(Ok(10), |s| s.parse())?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()?;
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut workers = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (client, url, key) = (client.clone(), url.clone(), key.clone());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            while Instant::now() < deadline {
                let start = Instant::now();
                match client.get(&url).bearer_auth(&key).send().await {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                        latencies.push(start.elapsed());
                    }
                    _ => errors += 1,
                }
            }
            (latencies, errors)
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for w in workers {
        let (l, e) = w.await?;
        all.extend(l);
        errors += e;
    }
    all.sort();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    println!(
        "{} requests in {seconds} s with {concurrency} connections: {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms, errors {errors}",
        all.len(),
        all.len() as f64 / seconds as f64,
        pct(0.50),
        pct(0.99),
    );
    Ok(())
}
