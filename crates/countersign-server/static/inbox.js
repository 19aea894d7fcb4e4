// Countersign inbox: the only script. Every <time class="countdown"> counts down to its
// data-expires (ms since the epoch), judged by the service's clock at render (data-now).
"use strict";
(function () {
  var loaded = Date.now();
  function left(ms) {
    if (ms <= 0) return "expired";
    var s = Math.floor(ms / 1000), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    s = s % 60;
    function two(n) { return (n < 10 ? "0" : "") + n; }
    if (h > 0) return "expires in " + h + " h " + two(m) + " min";
    if (m > 0) return "expires in " + m + " min " + two(s) + " s";
    return "expires in " + s + " s";
  }
  function tick() {
    var all = document.querySelectorAll("time.countdown");
    for (var i = 0; i < all.length; i++) {
      var el = all[i];
      el.textContent = left(Number(el.dataset.expires) - Number(el.dataset.now) - (Date.now() - loaded));
    }
  }
  document.addEventListener("DOMContentLoaded", function () { tick(); setInterval(tick, 1000); });
})();
