package import ChaosAudit
import ChaosCore
import Foundation

/// The report page's delivery table at any size: the worst stream-directions first, the first page of them as HTML
/// (what a page without scripts shows), and every one of them as compact JSON beside it, which a small inline script
/// pages and searches by name. A fleet's 100,000 stream-directions stay one self-contained file.
extension HTMLRenderer {
    /// Rows per page.
    static let streamPage = 200

    /// How much went wrong on a stream-direction: the messages it did not get exactly once and in order.
    package static func trouble(_ counts: DeliveryCounts) -> Int64 {
        counts.lost + counts.duplicated + counts.redelivered + counts.reordered + counts.gaps + counts.truncated
    }

    /// The worst first: the most trouble, then the lowest delivery, then by name (a stable order for equal ones).
    package static func worstFirst(_ streams: [StreamResult]) -> [StreamResult] {
        streams.enumerated().sorted { left, right in
            let (a, b) = (trouble(left.element.counts), trouble(right.element.counts))
            if a != b { return a > b }
            if left.element.counts.deliveryRatio != right.element.counts.deliveryRatio {
                return left.element.counts.deliveryRatio < right.element.counts.deliveryRatio
            }
            return left.offset < right.offset
        }.map(\.element)
    }

    /// The counts a row shows, in column order.
    static func cells(_ c: DeliveryCounts) -> [Int64] {
        [c.sent, c.delivered, c.ok, c.lost, c.recovered, c.duplicated, c.redelivered, c.reordered, c.gaps, c.unacked]
    }

    /// The Delivery section: the search box, the first page, the pager, the JSON of every row and its script.
    func deliverySection(_ report: RunReport) -> String {
        let streams = Self.worstFirst(report.streams)
        let troubled = streams.prefix { Self.trouble($0.counts) > 0 }.count
        var out = "<h2>Delivery</h2>"
        if streams.count > Self.streamPage {
            out +=
                "<p>\(ReportText.count(Int64(streams.count))) stream-directions, the worst first (\(ReportText.count(Int64(troubled)))"
                + " with messages lost, duplicated, redelivered or out of order). "
                + "<input id=stream-search type=search placeholder=\"stream name\" aria-label=\"search streams\"> "
                + "<button id=stream-prev type=button>previous</button> <span id=stream-page>1 of "
                + "\((streams.count + Self.streamPage - 1) / Self.streamPage) (\(ReportText.count(Int64(streams.count))))</span> "
                + "<button id=stream-next type=button>next</button></p>"
        }
        out +=
            "<table id=streams><thead><tr><th class=l>stream</th><th class=l>direction</th><th>sent</th><th>delivered</th><th>ok</th><th>lost</th>"
            + "<th>recovered</th><th>duplicated</th><th>redelivered</th><th>reordered</th><th>gaps</th><th>unacked</th><th>delivery</th></tr></thead><tbody>"
        for s in streams.prefix(Self.streamPage) {
            out += row(ReportText.stream(s.stream, receiver: s.receiver), s.direction.rawValue, s.counts)
        }
        out += "</tbody><tfoot>" + row("total", "", report.totals) + "</tfoot></table>\n"
        guard streams.count > Self.streamPage else { return out }
        let rows = streams.map { s -> [Any] in
            var row: [Any] = [ReportText.stream(s.stream, receiver: s.receiver), s.direction.rawValue]
            row += Self.cells(s.counts).map { NSNumber(value: $0) }
            row.append(s.counts.deliveryRatio)
            return row
        }
        // No `<` is left to close the script element: outside strings JSON has none, inside them `\u003c` means it.
        let json = (try? JSONSerialization.data(withJSONObject: rows)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
        out += "<script type=\"application/json\" id=stream-rows>" + json.replacingOccurrences(of: "<", with: "\\u003c")
        out += "</script>\n<script>\(Self.pagerScript)</script>\n"
        return out
    }

    /// One table row.
    func row(_ name: String, _ direction: String, _ c: DeliveryCounts) -> String {
        "<tr><td class=l>\(e(name))</td><td class=l>\(direction)</td>" + Self.cells(c).map { "<td>\(ReportText.count($0))</td>" }.joined()
            + "<td>\(ReportText.percent(c.deliveryRatio))</td></tr>"
    }

    /// Pages and searches the rows of `#stream-rows` (200 at a time; the search matches a substring of the name, and
    /// `#stream=NAME` in the page's address opens on that search).
    static let pagerScript = """
        (function(){
        var rows=JSON.parse(document.getElementById('stream-rows').textContent),shown=rows,page=0,size=\(streamPage);
        var body=document.querySelector('#streams tbody'),label=document.getElementById('stream-page');
        function fmt(n){return n.toLocaleString('en-US')}
        function pct(r){return r>=1?'100%':(r*100).toFixed(3)+'%'}
        function cell(text,left){var td=document.createElement('td');if(left)td.className='l';td.textContent=text;return td}
        function draw(){
          var pages=Math.max(1,Math.ceil(shown.length/size));page=Math.min(Math.max(page,0),pages-1);
          var fragment=document.createDocumentFragment();
          shown.slice(page*size,page*size+size).forEach(function(r){
            var tr=document.createElement('tr');tr.appendChild(cell(r[0],true));tr.appendChild(cell(r[1],true));
            for(var i=2;i<12;i++)tr.appendChild(cell(fmt(r[i])));tr.appendChild(cell(pct(r[12])));fragment.appendChild(tr)});
          body.replaceChildren(fragment);label.textContent=(page+1)+' of '+pages+' ('+fmt(shown.length)+')';
        }
        document.getElementById('stream-prev').onclick=function(){page--;draw()};
        document.getElementById('stream-next').onclick=function(){page++;draw()};
        var search=document.getElementById('stream-search');
        function filter(){var q=search.value.toLowerCase();shown=q?rows.filter(function(r){return r[0].toLowerCase().indexOf(q)>=0}):rows;page=0;draw()}
        search.oninput=function(){history.replaceState(null,'',search.value?'#stream='+encodeURIComponent(search.value):'#');filter()};
        // A link to report.html#stream=NAME opens on that search.
        if(location.hash.indexOf('#stream=')===0)search.value=decodeURIComponent(location.hash.slice(8));
        filter();
        })();
        """
}
