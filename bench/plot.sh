#!/usr/bin/env bash
# bench/plot.sh - ratio vs compression speed, one panel per (kind, mode), from
# bench/results.csv. Usage: bench/plot.sh [CSV] [PNG] [SUBTITLE]
set -euo pipefail
CSV=${1:-bench/results.csv}
PNG=${2:-bench/ratio_vs_speed.png}
SUB=${3:-}
PD=$(mktemp -d)
trap 'rm -rf "$PD"' EXIT
KINDS="model_bf16 model_fp32 optim"
for kind in $KINDS; do for mode in full delta; do
    # one line per tool: x1 y1 (1 thread) x2 y2 (2 threads; = x1 y1 if none) colour label
    awk -F, -v k="$kind" -v m="$mode" 'NR > 1 && $1 == k && $2 == m && $8 != "" {
        t = $3; if (!(t in seen)) { seen[t] = 1; order[++n] = t }
        if ($4 == 2) { x2[t] = $8; y2[t] = $7 } else { x1[t] = $8; y1[t] = $7 } }
        END { for (i = 1; i <= n; i++) { t = order[i]
            if (!(t in x1)) { x1[t] = x2[t]; y1[t] = y2[t] }
            if (!(t in x2)) { x2[t] = x1[t]; y2[t] = y1[t] }
            lab = t; gsub(/ shuffle/, "", lab); gsub(/byte-grouped\+zstd-1/, "bytegroup+zstd1", lab)
            print x1[t], y1[t], x2[t], y2[t], (t ~ /^lmc/ ? 1 : 2), "\"" lab "\"" } }' "$CSV" |
        sort -k2,2g | awk '{ print $0, (NR % 2 ? 1 : -1) }' > "$PD/$kind-$mode.dat"
    awk -F, -v k="$kind" -v m="$mode" 'NR > 1 && $1 == k && $2 == m && $3 == "order-0 floor" { print $7 }' "$CSV" > "$PD/$kind-$mode.floor"
done; done
{
    echo "set terminal pngcairo size 1900,1200 font 'DejaVu Sans,10'"
    echo "set output '$PNG'"
    echo "set multiplot layout 2,3 title \"ratio (compressed/original, lower is better) vs compression MB/s (log x)${SUB:+ - $SUB}\\nfilled circle = 1 thread, open diamond = 2 threads (joined by a line); red = lmc; dashed = order-0 floor of lmc byte groups\" font ',12'"
    echo "set termoption noenhanced"
    echo "set logscale x; set grid; set key off"
    echo "set xlabel 'compression MB/s'; set ylabel 'ratio'"
    echo "set linetype 1 lc rgb '#d62728'; set linetype 2 lc rgb '#1f77b4'; set linetype 3 lc rgb '#2ca02c'"
    for mode in full delta; do for kind in $KINDS; do
        f="$PD/$kind-$mode.dat"
        [ -s "$f" ] || continue
        fl=$(cat "$PD/$kind-$mode.floor")
        read -r xmin xmax ymin ymax < <(awk -v fl="$fl" 'NR == 1 { a = b = $1; c = d = $2 }
            { for (i = 1; i <= 3; i += 2) { if ($i < a) a = $i; if ($i > b) b = $i; if ($(i+1) < c) c = $(i+1); if ($(i+1) > d) d = $(i+1) } }
            END { if (fl != "" && fl < c) c = fl; p = (d - c) * 0.08 + 0.004; print a / 1.5, b * 3, c - p, d + p }' "$f")
        dy=$(awk -v a="$ymin" -v b="$ymax" 'BEGIN { print (b - a) * 0.012 }')
        echo "set title '$kind, $mode' font ',12'"
        echo "unset arrow"
        [ -z "$fl" ] || echo "set arrow from $xmin, $fl to $xmax, $fl nohead dt 2 lc rgb 'black'"
        echo "set xrange [$xmin:$xmax]; set yrange [$ymin:$ymax]"
        echo "plot '$f' using 1:2:(\$3-\$1):(\$4-\$2):5 with vectors nohead lc variable lw 1, \\
              '$f' using 1:2:5 with points lc variable pt 7 ps 1.3, \\
              '$f' using 3:4:5 with points lc variable pt 12 ps 1.6 lw 2, \\
              '$f' using (\$1*1.12):(\$2+\$7*$dy):6:5 with labels tc variable font ',9' left"
    done; done
    echo "unset multiplot"
} > "$PD/plot.gp"
gnuplot "$PD/plot.gp"
