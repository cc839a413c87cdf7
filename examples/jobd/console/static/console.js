// jobd console: a confirmation before destructive actions, and an opt-in
// auto-refresh (remembered per page) for the queues and cluster pages.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("form[data-confirm]").forEach(function (f) {
    f.addEventListener("submit", function (e) {
      if (!window.confirm(f.getAttribute("data-confirm"))) {
        e.preventDefault();
      }
    });
  });
  var box = document.querySelector("input[data-autorefresh]");
  if (!box) {
    return;
  }
  var key = "jobd-autorefresh:" + location.pathname;
  box.checked = localStorage.getItem(key) === "1";
  var timer = null;
  function arm() {
    if (timer) {
      clearTimeout(timer);
      timer = null;
    }
    if (box.checked) {
      timer = setTimeout(function () { location.reload(); }, 2000);
    }
  }
  box.addEventListener("change", function () {
    localStorage.setItem(key, box.checked ? "1" : "0");
    arm();
  });
  arm();
});
