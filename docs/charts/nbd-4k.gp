# nbd-4k: fio over NBD, 4 KiB random I/O (median of 5 runs, bars min-max)
# Drawn by `ztier bench ... --plot DIR`; to draw it again, in this folder: gnuplot nbd-4k.gp
set terminal pngcairo size 960,600 noenhanced font 'sans,11'
set output 'nbd-4k.png'
set linetype 1 lc rgb '#1f77b4' lw 2 pt 7 ps 1.2
set linetype 2 lc rgb '#ff7f0e' lw 2 pt 7 ps 1.2
set linetype 3 lc rgb '#2ca02c' lw 2 pt 7 ps 1.2
set linetype 4 lc rgb '#d62728' lw 2 pt 7 ps 1.2
set linetype 5 lc rgb '#9467bd' lw 2 pt 7 ps 1.2
set linetype 6 lc rgb '#8c564b' lw 2 pt 7 ps 1.2
set linetype 7 lc rgb '#e377c2' lw 2 pt 7 ps 1.2
set linetype 8 lc rgb '#7f7f7f' lw 2 pt 7 ps 1.2
set title 'fio over NBD, 4 KiB random I/O (median of 5 runs, bars min-max)'
set xlabel 'fio job (3 s each)'
set ylabel 'thousand I/Os per second'
set key outside bottom center horizontal Left reverse
set grid ytics lc rgb '#d0d0d0'
set border 3
set tics nomirror
set yrange [0:*]
set xtics ('randwrite 4k QD1' 0, 'randwrite 4k QD32' 1, 'randread 4k QD1' 2, 'randread 4k QD32' 3)
set xrange [-0.6:3.6]
set style fill solid 0.85 border -1
set offsets 0, 0, graph 0.08, 0
plot 'nbd-4k.dat' index 0 using ($1+(-0.3)):2:(0.2) with boxes lt 1 title 'ztier-lz4', \
     'nbd-4k.dat' index 0 using ($1+(-0.3)):3:(0):($4-$3) with vectors heads size screen 0.006,90 lc rgb 'black' lw 1.5 notitle, \
     'nbd-4k.dat' index 0 using ($1+(-0.3)):4:(sprintf('%.4g', $2)) with labels nopoint offset 0,0.8 font ',9' notitle, \
     'nbd-4k.dat' index 1 using ($1+(-0.1)):2:(0.2) with boxes lt 2 title 'ztier-zstd', \
     'nbd-4k.dat' index 1 using ($1+(-0.1)):3:(0):($4-$3) with vectors heads size screen 0.006,90 lc rgb 'black' lw 1.5 notitle, \
     'nbd-4k.dat' index 1 using ($1+(-0.1)):4:(sprintf('%.4g', $2)) with labels nopoint offset 0,0.8 font ',9' notitle, \
     'nbd-4k.dat' index 2 using ($1+(0.1)):2:(0.2) with boxes lt 3 title 'nbdkit', \
     'nbd-4k.dat' index 2 using ($1+(0.1)):3:(0):($4-$3) with vectors heads size screen 0.006,90 lc rgb 'black' lw 1.5 notitle, \
     'nbd-4k.dat' index 2 using ($1+(0.1)):4:(sprintf('%.4g', $2)) with labels nopoint offset 0,0.8 font ',9' notitle, \
     'nbd-4k.dat' index 3 using ($1+(0.3)):2:(0.2) with boxes lt 4 title 'nbdkit-zstd', \
     'nbd-4k.dat' index 3 using ($1+(0.3)):3:(0):($4-$3) with vectors heads size screen 0.006,90 lc rgb 'black' lw 1.5 notitle, \
     'nbd-4k.dat' index 3 using ($1+(0.3)):4:(sprintf('%.4g', $2)) with labels nopoint offset 0,0.8 font ',9' notitle
