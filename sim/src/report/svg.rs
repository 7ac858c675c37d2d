//! Tiny inline-SVG chart writers (line charts and stacked bars): no
//! JavaScript, no external files, so the report opens offline.

use std::fmt::Write;

/// Palette for series.
pub const COLORS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// Escapes text for XML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Stroke colour.
    pub color: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
    /// Dashed line.
    pub dashed: bool,
}

/// How the x axis is labelled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum XAxis {
    /// Seconds shown as hours (or days).
    Time,
    /// log10 of seconds, labelled 1s, 1m, 1h, …
    LogSeconds,
}

const W: f64 = 720.0;
const H: f64 = 260.0;
const L: f64 = 60.0;
const R: f64 = 150.0;
const T: f64 = 28.0;
const B: f64 = 36.0;

fn nice_max(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if v <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

/// A line chart with a legend on the right.
pub fn line_chart(
    id: &str,
    title: &str,
    y_label: &str,
    x_axis: XAxis,
    series: &[Series],
) -> String {
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for (x, y) in pts {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
        y1 = y1.max(*y);
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = nice_max(y1);
    let sx = |x: f64| L + (x - x0) / (x1 - x0) * (W - L - R);
    let sy = |y: f64| H - B - y / y1 * (H - T - B);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg id="{id}" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = esc(title)
    );
    let _ = write!(
        s,
        r#"<text x="{L}" y="18" class="title">{}</text>"#,
        esc(title)
    );
    for k in 0..=4 {
        let y = y1 * f64::from(k) / 4.0;
        let py = sy(y);
        let _ = write!(
            s,
            r##"<line x1="{L}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end" class="tick">{}</text>"##,
            W - R,
            L - 6.0,
            py + 4.0,
            fmt_num(y)
        );
    }
    for k in 0..=5 {
        let x = x0 + (x1 - x0) * f64::from(k) / 5.0;
        let label = match x_axis {
            XAxis::Time => {
                if x1 - x0 > 3.0 * 86400.0 {
                    format!("{:.1}d", x / 86400.0)
                } else {
                    format!("{:.0}h", x / 3600.0)
                }
            }
            XAxis::LogSeconds => crate::report::table::human_secs(10f64.powf(x)),
        };
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle" class="tick">{}</text>"#,
            sx(x),
            H - B + 16.0,
            esc(&label)
        );
    }
    let _ = write!(
        s,
        r#"<text x="14" y="{:.1}" transform="rotate(-90 14 {:.1})" text-anchor="middle" class="tick">{}</text>"#,
        (H - B + T) / 2.0,
        (H - B + T) / 2.0,
        esc(y_label)
    );
    for (i, ser) in series.iter().enumerate() {
        let mut d = String::new();
        for (k, (x, y)) in thin(&ser.points, 800).iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1}",
                if k == 0 { "M" } else { " L" },
                sx(*x),
                sy(*y)
            );
        }
        let dash = if ser.dashed {
            r#" stroke-dasharray="5,3""#
        } else {
            ""
        };
        let _ = write!(
            s,
            r#"<path d="{d}" fill="none" stroke="{}" stroke-width="1.5"{dash} data-series="{}"/>"#,
            ser.color,
            esc(&ser.name)
        );
        let ly = T + 14.0 * i as f64;
        let _ = write!(
            s,
            r#"<line x1="{}" x2="{}" y1="{ly:.1}" y2="{ly:.1}" stroke="{}" stroke-width="2"{dash}/><text x="{}" y="{:.1}" class="legend">{}</text>"#,
            W - R + 8.0,
            W - R + 24.0,
            ser.color,
            W - R + 28.0,
            ly + 4.0,
            esc(&ser.name)
        );
    }
    s.push_str("</svg>");
    s
}

/// Keeps at most `max` points (every k-th, plus the last).
fn thin(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max {
        return points.to_vec();
    }
    let step = points.len().div_ceil(max);
    let mut v: Vec<(f64, f64)> = points.iter().step_by(step).copied().collect();
    if let Some(last) = points.last()
        && v.last() != Some(last)
    {
        v.push(*last);
    }
    v
}

fn fmt_num(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// One stacked horizontal bar: a label and (segment, value, colour).
pub type Bar = (String, Vec<(String, f64, String)>);

/// The unit of a bar chart's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// US dollars.
    Dollars,
    /// GPU-hours.
    GpuHours,
}

impl Unit {
    fn show(self, v: f64) -> String {
        match self {
            Unit::Dollars => format!("${v:.0}"),
            Unit::GpuHours => format!("{v:.0} GPU-h"),
        }
    }
}

/// Stacked horizontal bars with values in `unit`.
pub fn stacked_bars(id: &str, title: &str, bars: &[Bar], unit: Unit) -> String {
    let max = bars
        .iter()
        .map(|(_, segs)| segs.iter().map(|s| s.1).sum::<f64>())
        .fold(0.0, f64::max);
    let max = nice_max(max);
    let row = 34.0;
    let h = T + 20.0 + row * bars.len() as f64 + 60.0;
    let left = 130.0;
    let width = W - left - 30.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg id="{id}" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" aria-label="{t}"><title>{t}</title><text x="10" y="18" class="title">{t}</text>"#,
        t = esc(title)
    );
    let mut legend: Vec<(String, String)> = Vec::new();
    for (i, (label, segs)) in bars.iter().enumerate() {
        let y = T + 10.0 + row * i as f64;
        let _ = write!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end" class="tick">{}</text>"#,
            left - 8.0,
            y + 15.0,
            esc(label)
        );
        let mut x = left;
        for (name, v, color) in segs {
            let w = v / max * width;
            let _ = write!(
                s,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="22" fill="{color}" data-segment="{}" data-value="{v}"><title>{}: {}</title></rect>"#,
                esc(name),
                esc(name),
                unit.show(*v)
            );
            x += w;
            if !legend.iter().any(|(n, _)| n == name) {
                legend.push((name.clone(), color.clone()));
            }
        }
        let total: f64 = segs.iter().map(|s| s.1).sum();
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" class="tick">{}</text>"#,
            x + 4.0,
            y + 15.0,
            unit.show(total)
        );
    }
    let ly = T + 20.0 + row * bars.len() as f64;
    for (i, (name, color)) in legend.iter().enumerate() {
        let lx = 10.0 + 110.0 * (i % 6) as f64;
        let yy = ly + 18.0 * (i / 6) as f64;
        let _ = write!(
            s,
            r#"<rect x="{lx:.1}" y="{yy:.1}" width="10" height="10" fill="{color}"/><text x="{:.1}" y="{:.1}" class="legend">{}</text>"#,
            lx + 14.0,
            yy + 9.0,
            esc(name)
        );
    }
    s.push_str("</svg>");
    s
}
